// YAML config loading and validation (see config.h).
#include "config/config.h"

#include "base/text.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>

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

// The value of `key` in mapping `m`, or an undefined node. (operator[] on a const node never
// inserts.)
YAML::Node get(const YAML::Node& m, const char* key) {
  const YAML::Node v = m[key];
  return v.IsDefined() && !v.IsNull() ? v : YAML::Node(YAML::NodeType::Undefined);
}

// One key of a config section: its name and how its value is read into the section's struct.
// A section's table is the whole truth about it: the keys it knows (an unknown key is an error
// that lists them), the order they are read in, and the field each one sets.
template <typename Section>
struct KeyRow {
  const char* key;
  Status (*read)(const YAML::Node& value, const std::string& name, Section& into);
};

// A row's reader: `Read` the value, then set `Member` from it.
template <typename Section, auto Member, auto Read>
Status into(const YAML::Node& value, const std::string& name, Section& c) {
  auto r = Read(value, name);
  if (!r) return r.failure_part();
  c.*Member = static_cast<std::remove_reference_t<decltype(c.*Member)>>(std::move(*r));
  return Ok{};
}

// Reads mapping `n` (the section called `section`, "" at the top) by its table.
template <typename Section, std::size_t N>
Status read_section(const YAML::Node& n, const std::string& section, const KeyRow<Section> (&rows)[N], Section& c) {
  if (!n.IsMap()) return Failure{(section.empty() ? "config" : section) + ": expected a mapping", line_of(n)};
  for (const auto& kv : n) {
    const std::string k = kv.first.IsScalar() ? kv.first.Scalar() : std::string("?");
    if (std::none_of(rows, rows + N, [&](const KeyRow<Section>& r) { return k == r.key; })) {
      std::set<std::string> known;
      for (const auto& r : rows) known.insert(r.key);
      std::string list;
      for (const auto& name : known) list += (list.empty() ? "" : ", ") + name;
      return Failure{"unknown key \"" + (section.empty() ? k : section + "." + k) + "\"; known keys: " + list,
                     line_of(kv.first)};
    }
  }
  for (const auto& row : rows) {
    const YAML::Node v = get(n, row.key);
    if (!v) continue;
    if (auto r = row.read(v, section.empty() ? std::string(row.key) : section + "." + row.key, c); !r) return r;
  }
  return Ok{};
}

const KeyRow<SizingConfig> kSizingKeys[] = {
    {"prefetchFactor", into<SizingConfig, &SizingConfig::prefetch_factor, positive_int>},
    {"headroom", into<SizingConfig, &SizingConfig::headroom_milli, headroom>},
    {"base", into<SizingConfig, &SizingConfig::base, quantity>},
    {"ncclPerProcess", into<SizingConfig, &SizingConfig::nccl_per_process, quantity>},
    {"min", into<SizingConfig, &SizingConfig::min, quantity>},
    {"max", into<SizingConfig, &SizingConfig::max, quantity>},
    {"default", into<SizingConfig, &SizingConfig::default_size, quantity>},
};

const KeyRow<SelectionConfig> kSelectionKeys[] = {
    {"labelKeys", into<SelectionConfig, &SelectionConfig::label_keys, string_list>},
    {"imageGlobs", into<SelectionConfig, &SelectionConfig::image_globs, string_list>},
    {"commands", into<SelectionConfig, &SelectionConfig::commands, string_list>},
    {"servingNames", into<SelectionConfig, &SelectionConfig::serving_names, string_list>},
    {"accelerators", into<SelectionConfig, &SelectionConfig::accelerators, string_list>},
    {"injectInitContainers", into<SelectionConfig, &SelectionConfig::inject_init_containers, boolean>},
    {"injectEphemeralContainers", into<SelectionConfig, &SelectionConfig::inject_ephemeral_containers, boolean>},
};

const KeyRow<InferenceConfig> kInferenceKeys[] = {
    {"enabled", into<InferenceConfig, &InferenceConfig::enabled, boolean>},
    {"size", into<InferenceConfig, &InferenceConfig::size, quantity>},
};

const KeyRow<OwnerLookupConfig> kOwnerLookupKeys[] = {
    {"enabled", into<OwnerLookupConfig, &OwnerLookupConfig::enabled, boolean>},
    {"timeoutMs", into<OwnerLookupConfig, &OwnerLookupConfig::timeout_ms, positive_int>},
    {"cacheSeconds", into<OwnerLookupConfig, &OwnerLookupConfig::cache_seconds, positive_int>},
};

Result<Mode> mode(const YAML::Node& m, const std::string& key) {
  auto v = scalar(m, key);
  if (!v) return v.failure_part();
  if (*v != "enforce" && *v != "audit") return Failure{key + ": must be enforce or audit, got \"" + *v + "\"", line_of(m)};
  return *v == "audit" ? Mode::kAudit : Mode::kEnforce;
}

Status sizing_section(const YAML::Node& v, const std::string& name, Config& c) {
  return read_section(v, name, kSizingKeys, c.sizing);
}

Status selection_section(const YAML::Node& v, const std::string& name, Config& c) {
  return read_section(v, name, kSelectionKeys, c.selection);
}

Status inference_section(const YAML::Node& v, const std::string& name, Config& c) {
  return read_section(v, name, kInferenceKeys, c.inference);
}

Status owner_lookup_section(const YAML::Node& v, const std::string& name, Config& c) {
  return read_section(v, name, kOwnerLookupKeys, c.owner_lookup);
}

const KeyRow<Config> kTopKeys[] = {
    {"mode", into<Config, &Config::mode, mode>},
    {"sizing", sizing_section},
    {"selection", selection_section},
    {"inference", inference_section},
    {"ownerLookup", owner_lookup_section},
};

Status validate(const Config& c) {
  for (const auto& rule : c.selection.label_keys)
    if (rule.empty() || rule[0] == '=')
      return Failure{"selection.labelKeys: \"" + rule + "\" has no label key (expected key or key=value)"};
  for (const auto& cmd : c.selection.commands)
    if (cmd.find_first_not_of(" \t") == std::string::npos)
      return Failure{"selection.commands: an empty entry (expected a program, e.g. torchrun or \"accelerate launch\")"};
  // An accelerator is an extended resource, always domain/name (nvidia.com/gpu): a name without a
  // '/' (cpu, memory, hugepages-2Mi) is Kubernetes' own and never counted.
  for (const auto& glob : c.selection.accelerators)
    if (glob.find('/') == std::string::npos)
      return Failure{"selection.accelerators: \"" + glob +
                     "\" is not an extended resource name (expected domain/name, e.g. nvidia.com/gpu or nvidia.com/*)"};
  if (c.inference.enabled && c.inference.size == 0) return Failure{"inference.size: must be greater than 0"};
  // Admission waits for a lookup; the API server's own call to the webhook has timeoutSeconds
  // (the chart's 5) for everything.
  if (c.owner_lookup.timeout_ms > 3000)
    return Failure{"ownerLookup.timeoutMs: " + std::to_string(c.owner_lookup.timeout_ms) +
                   " is above 3000 (the lookup must finish well inside the webhook's own timeout)"};
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
  if (root.IsDefined() && !root.IsNull())
    if (auto read = read_section(root, "", kTopKeys, c); !read) return read.failure_part();
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
  auto text = read_file(path);
  if (!text) return Failure{text.error() + " (the config file)"};
  auto r = parse_config(*text);
  if (!r) return Failure{path + (r.line() ? ":" + std::to_string(r.line()) : "") + ": " + r.error(), r.line()};
  return r;
}

}  // namespace shmguard::config
