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

std::string where(const YAML::Node& n) {
  const auto m = n.Mark();
  if (m.line < 0) return "";
  return " (line " + std::to_string(m.line + 1) + ")";
}

std::string scalar(const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar()) throw Err{key + ": expected a scalar" + where(n)};
  return n.Scalar();
}

std::uint64_t quantity(const YAML::Node& n, const std::string& key) {
  auto text = scalar(n, key);
  auto q = sizing::parse_quantity(text);
  if (!q.ok) throw Err{key + ": invalid quantity \"" + text + "\": " + q.error + where(n)};
  if (q.negative) throw Err{key + ": must not be negative" + where(n)};
  if (q.saturated) throw Err{key + ": quantity too large" + where(n)};
  return q.bytes;
}

std::uint64_t positive_int(const YAML::Node& n, const std::string& key) {
  auto text = scalar(n, key);
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos)
    throw Err{key + ": expected a positive integer, got \"" + text + "\"" + where(n)};
  auto v = std::stoull(text);
  if (v == 0) throw Err{key + ": must be at least 1" + where(n)};
  return v;
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

void check_keys(const YAML::Node& n, const std::string& section, const std::set<std::string>& known) {
  if (!n.IsMap()) throw Err{section + ": expected a mapping" + where(n)};
  for (const auto& kv : n) {
    auto k = kv.first.as<std::string>();
    if (!known.count(k)) {
      std::string list;
      for (const auto& s : known) list += (list.empty() ? "" : ", ") + s;
      throw Err{"unknown key \"" + (section.empty() ? k : section + "." + k) + "\"" +
                where(kv.first) + "; known keys: " + list};
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
    YAML::Node root = YAML::Load(std::string(yaml_text));
    Config c;
    if (root.IsNull()) {
      r.ok = true;
      r.config = c;
      return r;
    }
    check_keys(root, "", {"sizing", "selection"});
    if (auto s = root["sizing"]; s && !s.IsNull()) {
      check_keys(s, "sizing",
                 {"prefetchFactor", "headroom", "base", "ncclPerProcess", "min", "max", "default"});
      if (s["prefetchFactor"]) c.sizing.prefetch_factor = positive_int(s["prefetchFactor"], "sizing.prefetchFactor");
      if (s["headroom"]) c.sizing.headroom_milli = headroom(s["headroom"], "sizing.headroom");
      if (s["base"]) c.sizing.base = quantity(s["base"], "sizing.base");
      if (s["ncclPerProcess"]) c.sizing.nccl_per_process = quantity(s["ncclPerProcess"], "sizing.ncclPerProcess");
      if (s["min"]) c.sizing.min = quantity(s["min"], "sizing.min");
      if (s["max"]) c.sizing.max = quantity(s["max"], "sizing.max");
      if (s["default"]) c.sizing.default_size = quantity(s["default"], "sizing.default");
    }
    if (auto s = root["selection"]; s && !s.IsNull()) {
      check_keys(s, "selection",
                 {"labelKeys", "imageGlobs", "injectInitContainers", "injectEphemeralContainers"});
      if (s["labelKeys"]) c.selection.label_keys = string_list(s["labelKeys"], "selection.labelKeys");
      if (s["imageGlobs"]) c.selection.image_globs = string_list(s["imageGlobs"], "selection.imageGlobs");
      if (s["injectInitContainers"])
        c.selection.inject_init_containers = boolean(s["injectInitContainers"], "selection.injectInitContainers");
      if (s["injectEphemeralContainers"])
        c.selection.inject_ephemeral_containers =
            boolean(s["injectEphemeralContainers"], "selection.injectEphemeralContainers");
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
  } catch (const YAML::Exception& e) {
    r.error = "invalid YAML: " + std::string(e.what());
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
