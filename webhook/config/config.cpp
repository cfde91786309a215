// YAML config loading and validation (see config.h).
#include "config/config.h"

#include "manifests/yaml_doc.h"

#include <fstream>
#include <set>
#include <sstream>

namespace shmguard::config {
namespace {

using manifests::YamlNode;
using Node = const YamlNode*;

struct Err {
  std::string msg;
};

std::string where(Node n) {
  if (!n || n->line <= 0) return "";
  return " (line " + std::to_string(n->line) + ")";
}

std::string scalar(Node n, const std::string& key) {
  if (n->kind != YamlNode::Kind::kScalar) throw Err{key + ": expected a scalar" + where(n)};
  return n->value;
}

Node get(Node map, const char* key) {
  for (const auto& [k, v] : map->pairs)
    if (k->value == key) return v;
  return nullptr;
}

std::uint64_t quantity(Node n, const std::string& key) {
  auto text = scalar(n, key);
  auto q = sizing::parse_quantity(text);
  if (!q.ok) throw Err{key + ": invalid quantity \"" + text + "\": " + q.error + where(n)};
  if (q.negative) throw Err{key + ": must not be negative" + where(n)};
  if (q.saturated) throw Err{key + ": quantity too large" + where(n)};
  return q.bytes;
}

std::uint64_t positive_int(Node n, const std::string& key) {
  auto text = scalar(n, key);
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos)
    throw Err{key + ": expected a positive integer, got \"" + text + "\"" + where(n)};
  auto v = std::stoull(text);
  if (v == 0) throw Err{key + ": must be at least 1" + where(n)};
  return v;
}

bool boolean(Node n, const std::string& key) {
  auto text = scalar(n, key);
  if (text == "true") return true;
  if (text == "false") return false;
  throw Err{key + ": expected true or false, got \"" + text + "\"" + where(n)};
}

std::uint32_t headroom(Node n, const std::string& key) {
  // A decimal with at most three fractional digits, 1 <= h <= 100.
  auto text = scalar(n, key);
  std::uint64_t whole = 0;
  std::uint64_t milli = 0;
  int frac = 0;
  bool dot = false;
  bool any = false;
  for (char c : text) {
    if (c == '.' && !dot) {
      dot = true;
      continue;
    }
    if (c < '0' || c > '9' || (dot && frac == 3) || (!dot && whole > 1000))
      throw Err{key + ": expected a decimal like 1.5, got \"" + text + "\"" + where(n)};
    any = true;
    if (dot) {
      milli = milli * 10 + static_cast<std::uint64_t>(c - '0');
      ++frac;
    } else {
      whole = whole * 10 + static_cast<std::uint64_t>(c - '0');
    }
  }
  if (!any) throw Err{key + ": expected a decimal like 1.5, got \"" + text + "\"" + where(n)};
  for (; frac < 3; ++frac) milli *= 10;
  std::uint64_t v = whole * 1000 + milli;
  if (v < 1000 || v > 100000) throw Err{key + ": must be between 1 and 100" + where(n)};
  return static_cast<std::uint32_t>(v);
}

std::vector<std::string> string_list(Node n, const std::string& key) {
  if (n->is_null()) return {};
  if (n->kind != YamlNode::Kind::kSequence) throw Err{key + ": expected a list of strings" + where(n)};
  std::vector<std::string> out;
  for (Node item : n->items) {
    auto s = scalar(item, key + "[]");
    if (s.empty()) throw Err{key + ": empty entry" + where(item)};
    out.push_back(s);
  }
  return out;
}

void check_keys(Node n, const std::string& section, const std::set<std::string>& known) {
  if (n->kind != YamlNode::Kind::kMap) throw Err{(section.empty() ? "config" : section) + ": expected a mapping" + where(n)};
  for (const auto& [key, value] : n->pairs) {
    const std::string& k = key->value;
    if (!known.count(k)) {
      std::string list;
      for (const auto& s : known) list += (list.empty() ? "" : ", ") + s;
      throw Err{"unknown key \"" + (section.empty() ? k : section + "." + k) + "\"" +
                where(key) + "; known keys: " + list};
    }
  }
}

}  // namespace

std::string headroom_text(std::uint32_t headroom_milli) {
  std::string s = std::to_string(headroom_milli / 1000);
  std::uint32_t frac = headroom_milli % 1000;
  if (frac != 0) {
    std::string f = std::to_string(frac);
    f = std::string(3 - f.size(), '0') + f;
    while (!f.empty() && f.back() == '0') f.pop_back();
    s += "." + f;
  }
  return s;
}

ConfigResult parse_config(std::string_view yaml_text) {
  ConfigResult r;
  try {
    manifests::YamlDocument doc;
    manifests::YamlError yerr;
    if (!manifests::parse_document(std::string(yaml_text), doc, yerr))
      throw Err{"invalid YAML: " + yerr.message + (yerr.line ? " (line " + std::to_string(yerr.line) + ")" : "")};
    Node root = doc.root;
    Config c;
    if (!root) {
      r.ok = true;
      r.config = c;
      return r;
    }
    check_keys(root, "", {"mode", "sizing", "selection"});
    if (Node m = get(root, "mode"); m && !m->is_null()) {
      const std::string v = scalar(m, "mode");
      if (v != "enforce" && v != "audit") throw Err{"mode: must be enforce or audit, got \"" + v + "\"" + where(m)};
      c.mode = v == "audit" ? Mode::kAudit : Mode::kEnforce;
    }
    if (Node s = get(root, "sizing"); s && !s->is_null()) {
      check_keys(s, "sizing",
                 {"prefetchFactor", "headroom", "base", "ncclPerProcess", "min", "max", "default"});
      if (Node v = get(s, "prefetchFactor")) c.sizing.prefetch_factor = positive_int(v, "sizing.prefetchFactor");
      if (Node v = get(s, "headroom")) c.sizing.headroom_milli = headroom(v, "sizing.headroom");
      if (Node v = get(s, "base")) c.sizing.base = quantity(v, "sizing.base");
      if (Node v = get(s, "ncclPerProcess")) c.sizing.nccl_per_process = quantity(v, "sizing.ncclPerProcess");
      if (Node v = get(s, "min")) c.sizing.min = quantity(v, "sizing.min");
      if (Node v = get(s, "max")) c.sizing.max = quantity(v, "sizing.max");
      if (Node v = get(s, "default")) c.sizing.default_size = quantity(v, "sizing.default");
    }
    if (Node s = get(root, "selection"); s && !s->is_null()) {
      check_keys(s, "selection",
                 {"labelKeys", "imageGlobs", "injectInitContainers", "injectEphemeralContainers"});
      if (Node v = get(s, "labelKeys")) c.selection.label_keys = string_list(v, "selection.labelKeys");
      if (Node v = get(s, "imageGlobs")) c.selection.image_globs = string_list(v, "selection.imageGlobs");
      if (Node v = get(s, "injectInitContainers"))
        c.selection.inject_init_containers = boolean(v, "selection.injectInitContainers");
      if (Node v = get(s, "injectEphemeralContainers"))
        c.selection.inject_ephemeral_containers =
            boolean(v, "selection.injectEphemeralContainers");
    }
    if (c.sizing.min == 0) throw Err{"sizing.min: must be greater than 0"};
    if (c.sizing.min > c.sizing.max)
      throw Err{"sizing.min (" + sizing::format_quantity(c.sizing.min) + ") is above sizing.max (" +
                sizing::format_quantity(c.sizing.max) + ")"};
    if (c.sizing.default_size < c.sizing.min || c.sizing.default_size > c.sizing.max)
      throw Err{"sizing.default (" + sizing::format_quantity(c.sizing.default_size) +
                ") must lie between sizing.min and sizing.max"};
    r.ok = true;
    r.config = std::move(c);
  } catch (const Err& e) {
    r.error = e.msg;
  } catch (const std::exception& e) {
    r.error = std::string("invalid config: ") + e.what();
  }
  return r;
}

ConfigResult load_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ConfigResult r;
    r.error = path + ": cannot open config file";
    return r;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  auto r = parse_config(ss.str());
  if (!r.ok) r.error = path + ": " + r.error;
  return r;
}

}  // namespace shmguard::config
