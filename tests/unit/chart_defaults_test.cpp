// The Helm chart's defaults are the built-in ones: charts/shmguard/values.yaml's `config:` block
// (with its top-level `mode`, as the chart's "shmguard.config" template writes them into the
// ConfigMap), read by shmguard's own parser, equals parse_config("") field by field, and states
// every key the parser knows. A failure names the field: "config.sizing.max: the chart says 32Gi,
// the built-in default is 64Gi".
#include "config/config.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <regex>
#include <string>
#include <vector>

using shmguard::config::Config;
using shmguard::config::Mode;
using shmguard::config::parse_config;

namespace {

const std::string kValues = SHMGUARD_CHART_DIR "/values.yaml";

std::string join(const std::vector<std::string>& v) {
  std::string out = "[";
  for (const auto& s : v) out += (out.size() > 1 ? ", " : "") + s;
  return out + "]";
}
std::string text(std::uint64_t n) { return std::to_string(n); }
std::string text(bool b) { return b ? "true" : "false"; }

// Every key parse_config knows, "section.key", each with its value as text. A key the parser
// learns and this table lacks fails KnownKeysAreAllHere.
const std::map<std::string, std::function<std::string(const Config&)>>& fields() {
  static const std::map<std::string, std::function<std::string(const Config&)>> table{
      {"mode", [](const Config& c) { return std::string(c.mode == Mode::kAudit ? "audit" : "enforce"); }},
      {"sizing.prefetchFactor", [](const Config& c) { return text(c.sizing.prefetch_factor); }},
      {"sizing.headroom", [](const Config& c) { return text(std::uint64_t{c.sizing.headroom_milli}) + "/1000"; }},
      {"sizing.base", [](const Config& c) { return text(c.sizing.base); }},
      {"sizing.ncclPerProcess", [](const Config& c) { return text(c.sizing.nccl_per_process); }},
      {"sizing.min", [](const Config& c) { return text(c.sizing.min); }},
      {"sizing.max", [](const Config& c) { return text(c.sizing.max); }},
      {"sizing.default", [](const Config& c) { return text(c.sizing.default_size); }},
      {"selection.labelKeys", [](const Config& c) { return join(c.selection.label_keys); }},
      {"selection.imageGlobs", [](const Config& c) { return join(c.selection.image_globs); }},
      {"selection.commands", [](const Config& c) { return join(c.selection.commands); }},
      {"selection.servingNames", [](const Config& c) { return join(c.selection.serving_names); }},
      {"selection.accelerators", [](const Config& c) { return join(c.selection.accelerators); }},
      {"selection.injectInitContainers", [](const Config& c) { return text(c.selection.inject_init_containers); }},
      {"selection.injectEphemeralContainers",
       [](const Config& c) { return text(c.selection.inject_ephemeral_containers); }},
      {"inference.enabled", [](const Config& c) { return text(c.inference.enabled); }},
      {"inference.size", [](const Config& c) { return text(c.inference.size); }},
      {"ownerLookup.enabled", [](const Config& c) { return text(c.owner_lookup.enabled); }},
      {"ownerLookup.timeoutMs", [](const Config& c) { return text(c.owner_lookup.timeout_ms); }},
      {"ownerLookup.cacheSeconds", [](const Config& c) { return text(c.owner_lookup.cache_seconds); }},
  };
  return table;
}

// The keys parse_config knows in `section` ("" at the top), as its unknown-key error lists them.
std::vector<std::string> known_keys(const std::string& section) {
  const std::string probe = section.empty() ? "zzz: 1\n" : section + ":\n  zzz: 1\n";
  auto r = parse_config(probe);
  EXPECT_FALSE(r) << "a config with key zzz parsed";
  std::smatch m;
  const std::string error = r ? "" : r.error();
  static const std::regex known("known keys: (.*)$");
  if (!std::regex_search(error, m, known)) {
    ADD_FAILURE() << "no list of known keys in: " << error;
    return {};
  }
  std::vector<std::string> keys;
  const std::string list = m[1];
  for (std::size_t start = 0; start < list.size();) {
    const std::size_t comma = list.find(", ", start);
    keys.push_back(list.substr(start, comma - start));
    start = comma == std::string::npos ? list.size() : comma + 2;
  }
  return keys;
}

struct Chart {
  YAML::Node config;  // values.yaml's config: with its mode, as the template renders them
  Config parsed;
};

const Chart& chart() {
  static const Chart c = [] {
    Chart out;
    const YAML::Node values = YAML::LoadFile(kValues);
    out.config = YAML::Clone(values["config"]);
    out.config["mode"] = values["mode"];
    auto parsed = parse_config(YAML::Dump(out.config));
    if (!parsed) ADD_FAILURE() << kValues << ": its config block does not parse: " << parsed.error();
    else out.parsed = *parsed;
    return out;
  }();
  return c;
}

// The chart's own text for `key` ("sizing.max" -> "64Gi"), or "" when the chart does not state it.
std::string chart_text(const std::string& key) {
  YAML::Node n = YAML::Clone(chart().config);
  for (std::size_t start = 0; start <= key.size();) {
    const std::size_t dot = key.find('.', start);
    const std::string part = key.substr(start, dot - start);
    if (!n.IsMap() || !n[part]) return "";
    n = n[part];
    start = dot == std::string::npos ? key.size() + 1 : dot + 1;
  }
  return n.IsScalar() ? n.Scalar() : YAML::Dump(n);
}

}  // namespace

TEST(ChartDefaults, KnownKeysAreAllHere) {
  std::vector<std::string> all;
  for (const auto& top : known_keys("")) {
    if (top == "mode") {
      all.push_back(top);
      continue;
    }
    for (const auto& k : known_keys(top)) all.push_back(top + "." + k);
  }
  EXPECT_EQ(all.size(), fields().size());
  for (const auto& key : all)
    EXPECT_TRUE(fields().count(key)) << "parse_config knows config." << key
                                     << ": add its row to chart_defaults_test.cpp's fields()";
}

TEST(ChartDefaults, TheChartStatesEveryKey) {
  for (const auto& [key, value] : fields())
    EXPECT_NE(chart_text(key), "") << "config." << key << " is not in " << kValues
                                   << " (the chart would rely on the built-in default silently)";
}

TEST(ChartDefaults, TheChartsConfigIsTheBuiltInDefaults) {
  auto builtin = parse_config("");
  ASSERT_TRUE(builtin) << builtin.error();
  for (const auto& [key, value] : fields()) {
    const std::string want = value(*builtin);
    const std::string got = value(chart().parsed);
    EXPECT_EQ(got, want) << "config." << key << ": " << kValues << " says " << chart_text(key)
                         << ", the built-in default (config/config.h, sizing/formula.h) is " << want;
  }
}
