// YAML config loading and validation (see config.h).
#include "config/config.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <optional>
#include <set>
#include <sstream>

namespace shmguard::config {
namespace {

// " (line N)" from yaml-cpp's 0-based mark.
// The node's line (1-based) for a Failure, or 0.
int line_of(const YAML::Node& n) {
  const auto m = n.Mark();
  return m.is_null() || m.line < 0 ? 0 : m.line + 1;
}

Result<std::string> scalar(const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar()) return Failure{key + ": expected a scalar", line_of(n)};
  return n.Scalar();
}

Result<std::uint64_t> quantity(const YAML::Node& n, const std::string& key) {
  auto text = scalar(n, key);
  if (!text) return text.failure_part();
  // 0 is a valid base or NCCL allowance; validate() refuses a min of 0.
  auto q = sizing::parse_size(*text, {.zero_ok = true, .saturate_ok = false});
  if (!q) return Failure{key + ": \"" + *text + "\" " + q.error(), line_of(n)};
  return *q;
}

Result<std::uint64_t> positive_int(const YAML::Node& n, const std::string& key) {
  auto text = scalar(n, key);
  if (!text) return text.failure_part();
  auto v = sizing::parse_count(*text);  // the one parser for counts (annotations, flags, config)
  if (!v) return Failure{key + ": expected a positive integer, got \"" + *text + "\"", line_of(n)};
  if (*v == 0) return Failure{key + ": must be at least 1", line_of(n)};
  return *v;
}

Result<bool> boolean(const YAML::Node& n, const std::string& key) {
  auto text = scalar(n, key);
  if (!text) return text.failure_part();
  if (*text == "true") return true;
  if (*text == "false") return false;
  return Failure{key + ": expected true or false, got \"" + *text + "\"", line_of(n)};
}

// A decimal with at most three fractional digits, in thousandths; nullopt for any other text.
std::optional<std::uint64_t> decimal_milli(const std::string& text) {
  std::uint64_t whole = 0, milli = 0;
  int frac = 0;
  bool dot = false, any = false;
  for (char c : text) {
    if (c == '.' && !dot) {
      dot = true;
      continue;
    }
    if (c < '0' || c > '9' || (dot && frac == 3) || (!dot && whole > 1000)) return std::nullopt;
    any = true;
    if (dot) {
      milli = milli * 10 + static_cast<std::uint64_t>(c - '0');
      ++frac;
    } else {
      whole = whole * 10 + static_cast<std::uint64_t>(c - '0');
    }
  }
  if (!any) return std::nullopt;
  for (; frac < 3; ++frac) milli *= 10;
  return whole * 1000 + milli;
}

Result<std::uint32_t> headroom(const YAML::Node& n, const std::string& key) {
  auto text = scalar(n, key);
  if (!text) return text.failure_part();
  auto v = decimal_milli(*text);
  if (!v) return Failure{key + ": expected a decimal like 1.5, got \"" + *text + "\"", line_of(n)};
  if (*v < 1000 || *v > 100000) return Failure{key + ": must be between 1 and 100", line_of(n)};
  return static_cast<std::uint32_t>(*v);
}

Result<std::vector<std::string>> string_list(const YAML::Node& n, const std::string& key) {
  using R = std::vector<std::string>;
  if (n.IsNull()) return R{};
  if (!n.IsSequence()) return Failure{key + ": expected a list of strings", line_of(n)};
  R out;
  for (const auto& item : n) {
    auto s = scalar(item, key + "[]");
    if (!s) return s.failure_part();
    if (s->empty()) return Failure{key + ": empty entry", line_of(item)};
    out.push_back(*s);
  }
  return out;
}

// A mapping whose keys are all known.
Status check_keys(const YAML::Node& n, const std::string& section, const std::set<std::string>& known) {
  if (!n.IsMap()) return Failure{(section.empty() ? "config" : section) + ": expected a mapping", line_of(n)};
  for (const auto& kv : n) {
    const std::string k = kv.first.IsScalar() ? kv.first.Scalar() : std::string("?");
    if (!known.count(k)) {
      std::string list;
      for (const auto& s : known) list += (list.empty() ? "" : ", ") + s;
      return Failure{"unknown key \"" + (section.empty() ? k : section + "." + k) + "\"; known keys: " + list,
                     line_of(kv.first)};
    }
  }
  return Ok{};
}

// The value of `key` in mapping `m`, or an undefined node. (operator[] on a const node never
// inserts.)
YAML::Node get(const YAML::Node& m, const char* key) {
  const YAML::Node v = m[key];
  return v.IsDefined() && !v.IsNull() ? v : YAML::Node(YAML::NodeType::Undefined);
}

// Sets `out` from `section.key` of mapping `m` read by `read`, when the key is there.
template <typename T, typename Read>
Status field(const YAML::Node& m, const std::string& section, const char* key, Read read, T& out) {
  const YAML::Node v = get(m, key);
  if (!v) return Ok{};
  auto r = read(v, section.empty() ? std::string(key) : section + "." + key);
  if (!r) return r.failure_part();
  out = static_cast<T>(std::move(*r));
  return Ok{};
}

// The first failure of `steps`, each run only when all before it passed.
template <typename... Step>
Status in_order(Step&&... steps) {
  Status s = Ok{};
  ((s = s ? steps() : s), ...);
  return s;
}

Status read_sizing(const YAML::Node& s, SizingConfig& c) {
  const std::string sec = "sizing";
  return in_order([&] { return check_keys(s, sec, {"prefetchFactor", "headroom", "base", "ncclPerProcess", "min", "max", "default"}); },
                  [&] { return field(s, sec, "prefetchFactor", positive_int, c.prefetch_factor); },
                  [&] { return field(s, sec, "headroom", headroom, c.headroom_milli); },
                  [&] { return field(s, sec, "base", quantity, c.base); },
                  [&] { return field(s, sec, "ncclPerProcess", quantity, c.nccl_per_process); },
                  [&] { return field(s, sec, "min", quantity, c.min); },
                  [&] { return field(s, sec, "max", quantity, c.max); },
                  [&] { return field(s, sec, "default", quantity, c.default_size); });
}

Status read_selection(const YAML::Node& s, SelectionConfig& c) {
  const std::string sec = "selection";
  return in_order([&] { return check_keys(s, sec, {"labelKeys", "imageGlobs", "commands", "injectInitContainers",
                                                    "injectEphemeralContainers"}); },
                  [&] { return field(s, sec, "labelKeys", string_list, c.label_keys); },
                  [&] { return field(s, sec, "imageGlobs", string_list, c.image_globs); },
                  [&] { return field(s, sec, "commands", string_list, c.commands); },
                  [&] { return field(s, sec, "injectInitContainers", boolean, c.inject_init_containers); },
                  [&] { return field(s, sec, "injectEphemeralContainers", boolean, c.inject_ephemeral_containers); });
}

Result<Mode> mode(const YAML::Node& m, const std::string& key) {
  auto v = scalar(m, key);
  if (!v) return v.failure_part();
  if (*v != "enforce" && *v != "audit") return Failure{key + ": must be enforce or audit, got \"" + *v + "\"", line_of(m)};
  return *v == "audit" ? Mode::kAudit : Mode::kEnforce;
}

Status validate(const Config& c) {
  for (const auto& rule : c.selection.label_keys)
    if (rule.empty() || rule[0] == '=')
      return Failure{"selection.labelKeys: \"" + rule + "\" has no label key (expected key or key=value)"};
  for (const auto& cmd : c.selection.commands)
    if (cmd.find_first_not_of(" \t") == std::string::npos)
      return Failure{"selection.commands: an empty entry (expected a program, e.g. torchrun or \"accelerate launch\")"};
  if (c.sizing.min == 0) return Failure{"sizing.min: must be greater than 0"};
  if (c.sizing.min > c.sizing.max)
    return Failure{"sizing.min (" + sizing::format_quantity(c.sizing.min) + ") is above sizing.max (" +
                           sizing::format_quantity(c.sizing.max) + ")"};
  if (c.sizing.default_size < c.sizing.min || c.sizing.default_size > c.sizing.max)
    return Failure{"sizing.default (" + sizing::format_quantity(c.sizing.default_size) +
                           ") must lie between sizing.min and sizing.max"};
  return Ok{};
}

Result<Config> read_config(const YAML::Node& root) {
  Config c;
  if (root.IsDefined() && !root.IsNull()) {
    auto read = in_order([&] { return check_keys(root, "", {"mode", "sizing", "selection"}); },
                         [&] { return field(root, "", "mode", mode, c.mode); },
                         [&] { return get(root, "sizing") ? read_sizing(root["sizing"], c.sizing) : Status(Ok{}); },
                         [&] { return get(root, "selection") ? read_selection(root["selection"], c.selection) : Status(Ok{}); });
    if (!read) return read.failure_part();
  }
  if (auto valid = validate(c); !valid) return valid.failure_part();
  return c;
}

}  // namespace

Result<Config> parse_config(std::string_view yaml_text) {
  YAML::Node root;
  try {  // yaml-cpp reports syntax errors by throwing; nothing else here throws them
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return Failure{"invalid YAML: " + e.msg, e.mark.is_null() || e.mark.line < 0 ? 0 : e.mark.line + 1};
  }
  return read_config(root);
}

Result<Config> load_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Failure{path + ": cannot open config file"};
  std::stringstream ss;
  ss << in.rdbuf();
  auto r = parse_config(ss.str());
  if (!r) return Failure{path + (r.line() ? ":" + std::to_string(r.line()) : "") + ": " + r.error(), r.line()};
  return r;
}

}  // namespace shmguard::config
