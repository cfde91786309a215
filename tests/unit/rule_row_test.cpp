// One table of `check` rules: this build of report.cpp adds `test-row` (an enumerator and a row of
// kRuleTable, through SHMGUARD_TEST_RULE and SHMGUARD_TEST_RULE_ROW) and nothing else, and every
// place a rule is named has it: --fail-on (parsing, default, help, errors), the text summary,
// JSON totals, SARIF rules and results, junit failures.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/report.h"

using namespace shmguard;
using namespace shmguard::cli;
using nlohmann::json;

namespace {

std::string rendered(Format f, const std::vector<Record>& records, const Totals& t, const FailOn& on) {
  std::ostringstream os;
  render(os, f, records, t, on);
  return os.str();
}

Record finding_of_the_row() {
  Record r;
  r.file = "job.yaml";
  r.line = 3;
  r.kind = "Job";
  r.name = "train";
  r.path = "spec.template";
  r.decision = "would inject";
  r.findings.push_back({Rule::kTestRow, 7, "the test row fired"});
  r.failed = true;
  return r;
}

}  // namespace

TEST(RuleRow, FailOnKnowsItsNameDefaultHelpAndErrors) {
  EXPECT_EQ(rule_name(Rule::kTestRow), std::string("test-row"));
  EXPECT_EQ(default_fail_on(), "missing,too-small,stale,rejected,outgrown,wasteful,test-row");
  EXPECT_EQ(fail_on_help(), "findings that fail the run: missing,too-small,stale,warning,rejected,outgrown,wasteful,test-row or none");
  auto on = parse_fail_on("test-row");
  ASSERT_TRUE(on);
  EXPECT_TRUE(on->fails(Rule::kTestRow));
  EXPECT_FALSE(on->fails(Rule::kMissing));
  auto bad = parse_fail_on("test-rows");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "--fail-on: unknown finding \"test-rows\" (missing, too-small, stale, warning, rejected, outgrown, wasteful, test-row or none)");
}

TEST(RuleRow, EveryOutputCountsAndNamesIt) {
  Totals t;
  t.templates = 1;
  t.failed = 1;
  t.by_rule[static_cast<std::size_t>(Rule::kTestRow)] = 2;
  const auto on = *parse_fail_on(default_fail_on());
  const std::vector<Record> records{finding_of_the_row()};
  const std::string text = rendered(Format::kText, records, t, on);
  EXPECT_NE(text.find("1 pod template: 0 would get /dev/shm, 0 too small, 0 stale, 0 warnings, 2 test rows; 1 fails "
                      "(--fail-on missing,too-small,stale,rejected,test-row)"),
            std::string::npos)
      << text;
  t.by_rule[static_cast<std::size_t>(Rule::kTestRow)] = 0;  // counted_when_zero false: left out at 0
  EXPECT_EQ(rendered(Format::kText, {}, t, on).find("test row"), std::string::npos);
  t.by_rule[static_cast<std::size_t>(Rule::kTestRow)] = 2;
  const json j = json::parse(rendered(Format::kJson, records, t, on));
  EXPECT_EQ(j["totals"]["findings"]["test-row"], 2);
  EXPECT_EQ(j["items"][0]["findings"][0]["rule"], "test-row");
  const json sarif = json::parse(rendered(Format::kSarif, records, t, on));
  const json& rules = sarif["runs"][0]["tool"]["driver"]["rules"];
  ASSERT_EQ(rules.size(), kRuleCount - 2);  // outgrown and wasteful only with --observed
  EXPECT_EQ(rules.back()["id"], "test-row");
  EXPECT_EQ(rules.back()["shortDescription"]["text"], "a rule only the tests add");
  EXPECT_EQ(sarif["runs"][0]["results"][0]["ruleId"], "test-row");
  EXPECT_EQ(sarif["runs"][0]["results"][0]["ruleIndex"], kRuleCount - 3);  // its place in `rules`
  EXPECT_NE(rendered(Format::kJunit, records, t, on).find("<failure type=\"test-row\" message=\"the test row fired\">"),
            std::string::npos);
  EXPECT_NE(rendered(Format::kGithub, records, t, on).find("title=shmguard test-row"), std::string::npos);
}

TEST(RuleRow, ObservedRulesAreNamedOnlyWithObserved) {
  Totals t;
  t.templates = 1;
  auto on = *parse_fail_on(default_fail_on());
  EXPECT_TRUE(on.fails(Rule::kOutgrown));
  EXPECT_TRUE(on.fails(Rule::kWasteful));
  std::string text = rendered(Format::kText, {}, t, on);
  EXPECT_EQ(text.find("outgrown"), std::string::npos) << text;
  EXPECT_NE(text.find("(--fail-on missing,too-small,stale,rejected,test-row)"), std::string::npos) << text;
  json j = json::parse(rendered(Format::kJson, {}, t, on));
  EXPECT_FALSE(j["totals"]["findings"].contains("outgrown"));
  EXPECT_FALSE(j["totals"].contains("observedWithoutDocument"));
  on.observed = true;
  t.observed_without_document = {"Job ml/old (1 pod)"};
  text = rendered(Format::kText, {}, t, on);
  EXPECT_NE(text.find("0 outgrown, 0 wasteful"), std::string::npos) << text;
  EXPECT_NE(text.find("(--fail-on missing,too-small,stale,rejected,outgrown,wasteful,test-row)"), std::string::npos) << text;
  EXPECT_NE(text.find("observed: Job ml/old (1 pod): no document in the input"), std::string::npos) << text;
  j = json::parse(rendered(Format::kJson, {}, t, on));
  EXPECT_EQ(j["totals"]["findings"]["wasteful"], 0);
  EXPECT_EQ(j["totals"]["observedWithoutDocument"][0], "Job ml/old (1 pod)");
  const json sarif = json::parse(rendered(Format::kSarif, {}, t, on));
  EXPECT_EQ(sarif["runs"][0]["tool"]["driver"]["rules"].size(), kRuleCount);
}
