// `shmguard check` findings and their renderers. One list of findings (file, line, rule, message)
// per pod template; text, json, junit, sarif and github outputs are views over it.
#pragma once

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "manifests/offline.h"

namespace shmguard::cli {

#ifndef SHMGUARD_TEST_RULE  // rule_row_test's build adds a rule here and a row to kRuleTable
#define SHMGUARD_TEST_RULE
#endif

// The kinds of finding `--fail-on` chooses from. Closed set; strings only at the edges.
enum class Rule { kMissing, kTooSmall, kStale, kWarning, kRejected, kOutgrown, kWasteful SHMGUARD_TEST_RULE };

// One row per rule, in Rule's order: everything the outputs, --fail-on, its --help and its
// errors say about a rule comes from here.
struct RuleRow {
  Rule rule;
  const char* name;         // --fail-on, JSON totals, SARIF rule ids, junit failure types
  const char* description;  // SARIF's shortDescription
  bool fails_by_default;    // in the default --fail-on
  const char* one;          // the text summary's count: "1 <one>", "2 <many>"
  const char* many;
  bool counted_when_zero;   // "0 <many>" is printed too
  bool observed_only;       // judged only from observed figures (--observed): named only then
};
extern const RuleRow kRuleTable[];
extern const std::size_t kRuleCount;

const RuleRow& rule_row(Rule r);
const char* rule_name(Rule r);
std::string default_fail_on();  // "missing,too-small,stale,rejected"
std::string fail_on_help();     // the --fail-on flag's help: every rule, then "or none"

struct Finding {
  Rule rule;
  int line;
  std::string message;
};

struct FailOn {
  std::vector<bool> rules;  // by Rule; parse_fail_on(default_fail_on()) for the default
  bool observed = false;    // --observed was given: its rules are judged, so the outputs name them
  bool fails(Rule r) const { return rules[static_cast<std::size_t>(r)]; }
  bool shown(std::size_t rule) const;  // the outputs name the rule (observed_only ones with `observed`)
  bool fails(const std::vector<Finding>& findings) const;
};

// Parses a comma-separated subset of the rules' names ("none" for no failures).
Result<FailOn> parse_fail_on(const std::string& text);

// The `procs` object of `check -o json` and `size -o json`: {"count": N, "source": "..."}, the
// source "default" when nothing gave a number.
nlohmann::json procs_json(std::uint64_t count, const std::string& source);

// One pod template as `check` reports it.
struct Record {
  std::string file;
  int line = 0;
  std::string kind, name, path, decision, reason;
  std::string size;      // what shmguard sets or would set
  std::string existing;  // the sizeLimit already there, when known
  std::string sizing;    // the arithmetic behind `size` (shmguard.io/sizing), when computed
  std::uint64_t procs = 0;   // processes found for the pod (0: no size was computed)
  std::string procs_source;  // what gave them ("" for the default of 1)
  std::vector<inject::Warning> warnings;  // placed at their lines
  std::vector<Finding> findings;
  nlohmann::json observed;  // with --observed, what the cluster saw of its owner's pods (null: nothing)
  bool failed = false;
};

// What one template's report says, in the form every output format prints (`failed` stays false:
// `check` sets it from its --fail-on).
Record make_record(const manifests::TemplateReport& r);

struct Totals {
  std::size_t templates = 0, failed = 0;
  std::vector<std::size_t> by_rule = std::vector<std::size_t>(kRuleCount);  // by Rule
  std::vector<std::string> skipped_files;  // "file: why" (--skip-invalid)
  std::vector<std::string> observed_without_document;  // --observed owners no template matched
};

enum class Format { kText, kJson, kJunit, kSarif, kGithub, kCount };
struct FormatRow {
  Format format;
  const char* name;  // `check -o NAME`
};
extern const FormatRow kFormatTable[];  // in Format's order
extern const std::size_t kFormatCount;
std::vector<std::string> format_names();
std::string format_help();  // "text, json, junit, sarif or github"

// The one-line text form of a record (also `mutate`'s stderr report).
void render_text_record(std::ostream& os, const Record& r);
void render(std::ostream& os, Format f, const std::vector<Record>& records, const Totals& totals,
            const FailOn& fail_on);

}  // namespace shmguard::cli
