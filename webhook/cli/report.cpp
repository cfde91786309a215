// Findings and renderers for `shmguard check` (see report.h).
#include "cli/report.h"

#include <nlohmann/json.hpp>
#include <iterator>
#include <sstream>

#include "base/assert.h"
#include "base/enum_table.h"

#include "sizing/quantity.h"
#include "version.h"

namespace shmguard::cli {
namespace {

using nlohmann::json;

std::size_t idx(Rule r) { return static_cast<std::size_t>(r); }

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 has no place for other control characters.
        out += (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') ? ' ' : c;
    }
  }
  return out;
}

// GitHub workflow commands: data escapes %, CR, LF; properties also ':' and ','.
std::string gh_data(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '%') out += "%25";
    else if (c == '\r') out += "%0D";
    else if (c == '\n') out += "%0A";
    else out += c;
  }
  return out;
}

std::string gh_property(const std::string& s) {
  std::string out;
  for (char c : gh_data(s)) {
    if (c == ':') out += "%3A";
    else if (c == ',') out += "%2C";
    else out += c;
  }
  return out;
}

std::string subject(const Record& r) {
  return (r.kind.empty() ? "?" : r.kind) + "/" + (r.name.empty() ? "?" : r.name) + " " + r.path;
}

std::string dump(const json& j) { return j.dump(2, ' ', false, json::error_handler_t::replace); }

}  // namespace

json procs_json(std::uint64_t count, const std::string& source) {
  return {{"count", count}, {"source", source.empty() ? "default" : source}};
}

namespace {

void render_json(std::ostream& os, const std::vector<Record>& records, const Totals& t, const FailOn& f) {
  json items = json::array();
  for (const auto& r : records) {
    json w = json::array();
    for (const auto& x : r.warnings) w.push_back({{"line", x.line}, {"message", x.text}});
    json findings = json::array();
    for (const auto& fd : r.findings)
      findings.push_back({{"rule", rule_name(fd.rule)}, {"line", fd.line}, {"message", fd.message},
                          {"fails", f.fails(fd.rule)}});
    json j = {{"file", r.file}, {"line", r.line},         {"kind", r.kind},
              {"name", r.name}, {"template", r.path},     {"decision", r.decision},
              {"reason", r.reason}, {"warnings", w},      {"findings", findings},
              {"failed", r.failed}};
    j["size"] = r.size.empty() ? json(nullptr) : json(r.size);
    j["existing"] = r.existing.empty() ? json(nullptr) : json(r.existing);
    j["sizing"] = r.sizing.empty() ? json(nullptr) : json(r.sizing);
    if (r.procs) j["procs"] = procs_json(r.procs, r.procs_source);
    if (f.observed) j["observed"] = r.observed;
    items.push_back(std::move(j));
  }
  json by_rule = json::object();
  for (std::size_t i = 0; i < kRuleCount; ++i)
    if (f.shown(i)) by_rule[kRuleTable[i].name] = t.by_rule[i];
  json fail_on = json::array();
  for (std::size_t i = 0; i < kRuleCount; ++i)
    if (f.rules[i] && f.shown(i)) fail_on.push_back(kRuleTable[i].name);
  json totals = {{"templates", t.templates}, {"failed", t.failed}, {"findings", by_rule}, {"skippedFiles", t.skipped_files}};
  if (f.observed) totals["observedWithoutDocument"] = t.observed_without_document;
  os << dump({{"items", items}, {"totals", totals}, {"failOn", fail_on}}) << "\n";
}

void render_junit(std::ostream& os, const std::vector<Record>& records, const Totals& t, const FailOn& f) {
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  os << "<testsuites name=\"shmguard check\" tests=\"" << t.templates << "\" failures=\"" << t.failed << "\">\n";
  std::size_t i = 0;
  while (i < records.size()) {
    std::size_t j = i, failures = 0;
    while (j < records.size() && records[j].file == records[i].file) failures += records[j++].failed;
    os << "  <testsuite name=\"" << xml_escape(records[i].file) << "\" tests=\"" << (j - i) << "\" failures=\""
       << failures << "\">\n";
    for (; i < j; ++i) {
      const Record& r = records[i];
      os << "    <testcase classname=\"" << xml_escape(r.file) << "\" name=\"" << xml_escape(subject(r))
         << "\" file=\"" << xml_escape(r.file) << "\" line=\"" << r.line << "\"";
      if (!r.failed) {
        os << "/>\n";
        continue;
      }
      os << ">\n";
      for (const auto& fd : r.findings) {
        if (f.fails(fd.rule)) {
          os << "      <failure type=\"" << rule_name(fd.rule) << "\" message=\"" << xml_escape(fd.message) << "\">"
             << xml_escape(r.file + ":" + std::to_string(fd.line) + ": " + fd.message) << "</failure>\n";
        }
      }
      os << "    </testcase>\n";
    }
    os << "  </testsuite>\n";
  }
  os << "</testsuites>\n";
}

void render_sarif(std::ostream& os, const std::vector<Record>& records, const FailOn& f) {
  json rules = json::array();
  std::vector<std::size_t> index_of(kRuleCount);  // a rule's place in `rules`
  for (std::size_t i = 0; i < kRuleCount; ++i) {
    if (!f.shown(i)) continue;
    index_of[i] = rules.size();
    const Rule r = kRuleTable[i].rule;
    rules.push_back({{"id", kRuleTable[i].name},
                     {"name", kRuleTable[i].name},
                     {"shortDescription", {{"text", kRuleTable[i].description}}},
                     {"helpUri", "https://github.com/shmguard/shmguard#annotations"},
                     {"defaultConfiguration", {{"level", f.fails(r) ? "error" : "warning"}}}});
  }
  json results = json::array();
  for (const auto& r : records) {
    for (const auto& fd : r.findings) {
      results.push_back(
          {{"ruleId", rule_name(fd.rule)},
           {"ruleIndex", index_of[idx(fd.rule)]},
           {"level", f.fails(fd.rule) ? "error" : "warning"},
           {"message", {{"text", subject(r) + ": " + fd.message}}},
           {"locations",
            {{{"physicalLocation",
               {{"artifactLocation", {{"uri", r.file}}}, {"region", {{"startLine", std::max(1, fd.line)}}}}}}}}});
    }
  }
  json run = {{"tool", {{"driver", {{"name", "shmguard"},
                                    {"version", SHMGUARD_VERSION},
                                    {"informationUri", "https://github.com/shmguard/shmguard"},
                                    {"rules", rules}}}}},
              {"results", results}};
  os << dump({{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"}, {"version", "2.1.0"}, {"runs", {run}}})
     << "\n";
}

void render_github(std::ostream& os, const std::vector<Record>& records, const FailOn& f) {
  for (const auto& r : records) {
    for (const auto& fd : r.findings) {
      os << "::" << (f.fails(fd.rule) ? "error" : "warning") << " file=" << gh_property(r.file)
         << ",line=" << fd.line << ",title=" << gh_property(std::string("shmguard ") + rule_name(fd.rule))
         << "::" << gh_data(subject(r) + ": " + fd.message) << "\n";
    }
  }
}

std::string plural(std::size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

void render_text(std::ostream& os, const std::vector<Record>& records, const Totals& t, const FailOn& f) {
  for (const auto& r : records) render_text_record(os, r);
  for (const auto& s : t.skipped_files) os << s << "\n";
  os << plural(t.templates, "pod template", "pod templates") << ": ";
  const char* sep = "";
  for (std::size_t i = 0; i < kRuleCount; ++i) {
    const RuleRow& row = kRuleTable[i];
    if (!f.shown(i) || (t.by_rule[i] == 0 && !row.counted_when_zero)) continue;
    os << sep << plural(t.by_rule[i], row.one, row.many);
    sep = ", ";
  }
  os << "; " << plural(t.failed, "fails", "fail");
  std::string list;
  for (std::size_t i = 0; i < kRuleCount; ++i)
    if (f.rules[i] && f.shown(i)) list += (list.empty() ? "" : ",") + std::string(kRuleTable[i].name);
  os << " (--fail-on " << (list.empty() ? "none" : list) << ")\n";
  for (const auto& o : t.observed_without_document) os << "observed: " << o << ": no document in the input\n";
}

}  // namespace

#ifndef SHMGUARD_TEST_RULE_ROW
#define SHMGUARD_TEST_RULE_ROW
#endif

const RuleRow kRuleTable[] = {
    {.rule = Rule::kMissing, .name = "missing",
     .description = "A training pod template without /dev/shm sizing: shmguard would inject it", .fails_by_default = true,
     .one = "would get /dev/shm", .many = "would get /dev/shm", .counted_when_zero = true, .observed_only = false},
    {.rule = Rule::kTooSmall, .name = "too-small", .description = "The pod's own /dev/shm is smaller than its annotations need",
     .fails_by_default = true, .one = "too small", .many = "too small", .counted_when_zero = true, .observed_only = false},
    {.rule = Rule::kStale, .name = "stale", .description = "shmguard's /dev/shm volume has a size its annotations no longer give",
     .fails_by_default = true, .one = "stale", .many = "stale", .counted_when_zero = true, .observed_only = false},
    {.rule = Rule::kWarning, .name = "warning", .description = "A bad or unknown shmguard.io annotation, or another warning",
     .fails_by_default = false, .one = "warning", .many = "warnings", .counted_when_zero = true, .observed_only = false},
    {.rule = Rule::kRejected, .name = "rejected",
     .description = "A shmguard.io annotation the API server would refuse (a value that is not a string)",
     .fails_by_default = true, .one = "rejected", .many = "rejected", .counted_when_zero = false, .observed_only = false},
    {.rule = Rule::kOutgrown, .name = "outgrown",
     .description = "The owner's pods were seen using 90% or more of the /dev/shm the template gives (--observed)",
     .fails_by_default = true, .one = "outgrown", .many = "outgrown", .counted_when_zero = true, .observed_only = true},
    {.rule = Rule::kWasteful, .name = "wasteful",
     .description = "The template gives more than 8x the /dev/shm its owner's pods were seen using (--observed)",
     .fails_by_default = true, .one = "wasteful", .many = "wasteful", .counted_when_zero = true, .observed_only = true},
    SHMGUARD_TEST_RULE_ROW
};
const std::size_t kRuleCount = std::size(kRuleTable);

constexpr FormatRow kFormatTable[] = {
    {.format = Format::kText, .name = "text"},   {.format = Format::kJson, .name = "json"},
    {.format = Format::kJunit, .name = "junit"}, {.format = Format::kSarif, .name = "sarif"},
    {.format = Format::kGithub, .name = "github"},
};
const std::size_t kFormatCount = std::size(kFormatTable);
static_assert(in_enum_order(kFormatTable, &FormatRow::format, static_cast<std::size_t>(Format::kCount)),
              "kFormatTable: one row for every Format, in Format's order");

std::vector<std::string> format_names() {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < kFormatCount; ++i) out.emplace_back(kFormatTable[i].name);
  return out;
}

std::string format_help() {
  std::string out;
  for (std::size_t i = 0; i < kFormatCount; ++i)
    out += (i == 0 ? "" : i + 1 == kFormatCount ? " or " : ", ") + std::string(kFormatTable[i].name);
  return out;
}

const RuleRow& rule_row(Rule r) {
  SHMGUARD_ASSERT(idx(r) < kRuleCount && kRuleTable[idx(r)].rule == r);
  return kRuleTable[idx(r)];
}

const char* rule_name(Rule r) { return rule_row(r).name; }

std::string default_fail_on() {
  std::string out;
  for (std::size_t i = 0; i < kRuleCount; ++i)
    if (kRuleTable[i].fails_by_default) out += (out.empty() ? "" : ",") + std::string(kRuleTable[i].name);
  return out;
}

namespace {
std::string rule_names(const char* sep) {
  std::string out;
  for (std::size_t i = 0; i < kRuleCount; ++i) out += (i ? sep : "") + std::string(kRuleTable[i].name);
  return out;
}
}  // namespace

std::string fail_on_help() { return "findings that fail the run: " + rule_names(",") + " or none"; }

Result<FailOn> parse_fail_on(const std::string& text) {
  FailOn f;
  f.rules.assign(kRuleCount, false);
  if (text == "none" || text.empty()) return f;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    bool known = false;
    for (std::size_t i = 0; i < kRuleCount; ++i) {
      if (item == kRuleTable[i].name) {
        f.rules[i] = true;
        known = true;
      }
    }
    if (!known) return Failure{"--fail-on: unknown finding \"" + item + "\" (" + rule_names(", ") + " or none)"};
  }
  return f;
}

bool FailOn::shown(std::size_t rule) const { return observed || !kRuleTable[rule].observed_only; }

bool FailOn::fails(const std::vector<Finding>& findings) const {
  return std::any_of(findings.begin(), findings.end(), [&](const Finding& f) { return fails(f.rule); });
}

Record make_record(const manifests::TemplateReport& rep) {
  Record r;
  r.file = rep.file;
  r.line = rep.line;
  r.kind = rep.ref.kind;
  r.name = rep.ref.name;
  r.path = rep.ref.display_path();
  r.decision = rep.summary_planned();
  r.reason = name(rep.result.reason);
  const auto& res = rep.result;
  if (res.sizing) {
    r.size = sizing::format_quantity(res.sizing->bytes);
    r.sizing = res.sizing->explanation;
    r.procs = res.sizing->procs;
    r.procs_source = res.sizing->procs_source;
  }
  if (res.existing_size) r.existing = sizing::format_quantity(*res.existing_size);
  r.warnings = res.warnings;
  for (auto& w : r.warnings) w.line = w.line ? w.line : r.line;  // one not placed points at the template
  if (res.action == inject::Action::kInjected) r.findings.push_back({Rule::kMissing, r.line, r.decision});
  if (res.too_small) r.findings.push_back({Rule::kTooSmall, r.line, r.decision});
  if (res.stale) r.findings.push_back({Rule::kStale, r.line, r.decision});
  for (const auto& w : r.warnings) r.findings.push_back({Rule::kWarning, w.line, w.text});
  for (const auto& w : rep.rejected) r.findings.push_back({Rule::kRejected, w.line, w.text});
  return r;
}

void render_text_record(std::ostream& os, const Record& r) {
  os << r.file << ":" << r.line << " " << subject(r) << " -> " << r.decision;
  if (!r.procs_source.empty()) os << " (" << r.procs << (r.procs == 1 ? " proc" : " procs") << " from " << r.procs_source << ")";
  os << "\n";
  for (const auto& w : r.warnings) os << r.file << ":" << w.line << ": warning: " << w.text << "\n";
  for (const auto& f : r.findings) {
    if (f.rule == Rule::kRejected) os << r.file << ":" << f.line << ": error: " << f.message << "\n";
    if (f.rule == Rule::kOutgrown || f.rule == Rule::kWasteful) os << r.file << ":" << f.line << ": " << f.message << "\n";
  }
}

void render(std::ostream& os, Format f, const std::vector<Record>& records, const Totals& totals,
            const FailOn& fail_on) {
  switch (f) {
    case Format::kText: return render_text(os, records, totals, fail_on);
    case Format::kJson: return render_json(os, records, totals, fail_on);
    case Format::kJunit: return render_junit(os, records, totals, fail_on);
    case Format::kSarif: return render_sarif(os, records, fail_on);
    case Format::kGithub: return render_github(os, records, fail_on);
    case Format::kCount: return;
  }
}

}  // namespace shmguard::cli
