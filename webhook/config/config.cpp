// YAML config loading and validation (see config.h).
#include "config/config.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>

namespace shmguard::config {
namespace {

struct Err {
  std::string msg;
};

// " (line N)" from yaml-cpp's 0-based mark.
std::string where(const YAML::Node& n) {
  const auto m = n.Mark();
  if (m.is_null() || m.line < 0) return "";
  return " (line " + std::to_string(m.line + 1) + ")";
}

std::string scalar(const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar()) throw Err{key + ": expected a scalar" + where(n)};
  return n.Scalar();
}

std::uint64_t quantity(const YAML::Node& n, const std::string& key) {
  auto text = scalar(n, key);
  // 0 is a valid base or NCCL allowance; validate() refuses a min of 0.
  auto q = sizing::parse_size(text, {.zero_ok = true, .saturate_ok = false});
  if (!q) throw Err{key + ": \"" + text + "\" " + q.error() + where(n)};
  return *q;
}

std::uint64_t positive_int(const YAML::Node& n, const std::string& key) {
  auto text = scalar(n, key);
  auto v = sizing::parse_count(text);  // the one parser for counts (annotations, flags, config)
  if (!v) throw Err{key + ": expected a positive integer, got \"" + text + "\"" + where(n)};
  if (*v == 0) throw Err{key + ": must be at least 1" + where(n)};
  return *v;
}

bool boolean(const YAML::Node& n, const std::string& key) {
  auto text = scalar(n, key);
  if (text == "true") return true;
  if (text == "false") return false;
  throw Err{key + ": expected true or false, got \"" + text + "\"" + where(n)};
}

std::uint32_t headroom(const YAML::Node& n, const std::string& key) {
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

std::vector<std::string> string_list(const YAML::Node& n, const std::string& key) {
  if (n.IsNull()) return {};
  if (!n.IsSequence()) throw Err{key + ": expected a list of strings" + where(n)};
  std::vector<std::string> out;
  for (const auto& item : n) {
    auto s = scalar(item, key + "[]");
    if (s.empty()) throw Err{key + ": empty entry" + where(item)};
    out.push_back(s);
  }
  return out;
}

// A mapping whose keys are all known; returns it for lookups.
const YAML::Node& check_keys(const YAML::Node& n, const std::string& section, const std::set<std::string>& known) {
  if (!n.IsMap()) throw Err{(section.empty() ? "config" : section) + ": expected a mapping" + where(n)};
  for (const auto& kv : n) {
    const std::string k = kv.first.IsScalar() ? kv.first.Scalar() : std::string("?");
    if (!known.count(k)) {
      std::string list;
      for (const auto& s : known) list += (list.empty() ? "" : ", ") + s;
      throw Err{"unknown key \"" + (section.empty() ? k : section + "." + k) + "\"" + where(kv.first) +
                "; known keys: " + list};
    }
  }
  return n;
}

// The value of `key` in mapping `m`, or an undefined node. (operator[] on a const node never
// inserts.)
YAML::Node get(const YAML::Node& m, const char* key) {
  const YAML::Node v = m[key];
  return v.IsDefined() && !v.IsNull() ? v : YAML::Node(YAML::NodeType::Undefined);
}

void read_sizing(const YAML::Node& s, SizingConfig& c) {
  check_keys(s, "sizing", {"prefetchFactor", "headroom", "base", "ncclPerProcess", "min", "max", "default"});
  if (auto v = get(s, "prefetchFactor")) c.prefetch_factor = positive_int(v, "sizing.prefetchFactor");
  if (auto v = get(s, "headroom")) c.headroom_milli = headroom(v, "sizing.headroom");
  if (auto v = get(s, "base")) c.base = quantity(v, "sizing.base");
  if (auto v = get(s, "ncclPerProcess")) c.nccl_per_process = quantity(v, "sizing.ncclPerProcess");
  if (auto v = get(s, "min")) c.min = quantity(v, "sizing.min");
  if (auto v = get(s, "max")) c.max = quantity(v, "sizing.max");
  if (auto v = get(s, "default")) c.default_size = quantity(v, "sizing.default");
}

void read_selection(const YAML::Node& s, SelectionConfig& c) {
  check_keys(s, "selection", {"labelKeys", "imageGlobs", "injectInitContainers", "injectEphemeralContainers"});
  if (auto v = get(s, "labelKeys")) c.label_keys = string_list(v, "selection.labelKeys");
  if (auto v = get(s, "imageGlobs")) c.image_globs = string_list(v, "selection.imageGlobs");
  if (auto v = get(s, "injectInitContainers")) c.inject_init_containers = boolean(v, "selection.injectInitContainers");
  if (auto v = get(s, "injectEphemeralContainers"))
    c.inject_ephemeral_containers = boolean(v, "selection.injectEphemeralContainers");
}

void validate(const Config& c) {
  for (const auto& rule : c.selection.label_keys)
    if (rule.empty() || rule[0] == '=')
      throw Err{"selection.labelKeys: \"" + rule + "\" has no label key (expected key or key=value)"};
  if (c.sizing.min == 0) throw Err{"sizing.min: must be greater than 0"};
  if (c.sizing.min > c.sizing.max)
    throw Err{"sizing.min (" + sizing::format_quantity(c.sizing.min) + ") is above sizing.max (" +
              sizing::format_quantity(c.sizing.max) + ")"};
  if (c.sizing.default_size < c.sizing.min || c.sizing.default_size > c.sizing.max)
    throw Err{"sizing.default (" + sizing::format_quantity(c.sizing.default_size) +
              ") must lie between sizing.min and sizing.max"};
}

}  // namespace

Result<Config> parse_config(std::string_view yaml_text) {
  try {
    const YAML::Node root = YAML::Load(std::string(yaml_text));
    Config c;
    if (root.IsDefined() && !root.IsNull()) {
      check_keys(root, "", {"mode", "sizing", "selection"});
      if (auto m = get(root, "mode")) {
        const std::string v = scalar(m, "mode");
        if (v != "enforce" && v != "audit") throw Err{"mode: must be enforce or audit, got \"" + v + "\"" + where(m)};
        c.mode = v == "audit" ? Mode::kAudit : Mode::kEnforce;
      }
      if (auto s = get(root, "sizing")) read_sizing(s, c.sizing);
      if (auto s = get(root, "selection")) read_selection(s, c.selection);
    }
    validate(c);
    return c;
  } catch (const Err& e) {
    return Result<Config>::failure(e.msg);
  } catch (const YAML::Exception& e) {
    return Result<Config>::failure("invalid YAML: " + e.msg +
                                   (e.mark.is_null() ? "" : " (line " + std::to_string(e.mark.line + 1) + ")"));
  } catch (const std::exception& e) {
    return Result<Config>::failure(std::string("invalid config: ") + e.what());
  }
}

Result<Config> load_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Result<Config>::failure(path + ": cannot open config file");
  std::stringstream ss;
  ss << in.rdbuf();
  auto r = parse_config(ss.str());
  if (!r) return Result<Config>::failure(path + ": " + r.error());
  return r;
}

}  // namespace shmguard::config
