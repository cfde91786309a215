// The one JSON-lines writer: every line parses, whatever bytes a field holds, with ts, level and
// msg first on both the admission path (LogLine) and every other line (log).
#include "server/log.h"

#include <gtest/gtest.h>

#include <string>

#include "../stderr_capture.h"

using namespace shmguard;
using nlohmann::json;

using test::stderr_of;

TEST(Log, InvalidUtf8BecomesTheReplacementCharacterAndTheLineParses) {
  // A lone continuation byte, a truncated 3-byte sequence, an overlong '/', a surrogate, valid é.
  const std::string bad = std::string("a\x80") + "b\xE2\x82" + "c\xC0\xAF" + "d\xED\xA0\x80" + "e\xC3\xA9";
  const std::string out = stderr_of([&] {
    server::LogLine(server::Level::kWarn, "bad \xFF path").str("path", bad).list("xs", {"\xF5", "ok"}).emit();
    server::log(server::Level::kError, "field", {{"why", bad}, {"n", 3}});
  });
  const auto nl = out.find('\n');
  ASSERT_NE(nl, std::string::npos) << out;
  const json a = json::parse(out.substr(0, nl));
  const json b = json::parse(out.substr(nl + 1));
  EXPECT_EQ(a["msg"], "bad \xEF\xBF\xBD path");
  EXPECT_EQ(a["path"], "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD" "c\xEF\xBF\xBD\xEF\xBF\xBD" "d\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" "e\xC3\xA9");
  EXPECT_EQ(a["xs"], json({"\xEF\xBF\xBD", "ok"}));
  EXPECT_EQ(b["why"], a["path"]);
  EXPECT_EQ(b["n"], 3);  // a number stays a number
}

TEST(Log, BothWritersPutTsLevelAndMsgFirst) {
  const std::string out = stderr_of([] {
    server::LogLine(server::Level::kInfo, "admission").str("uid", "u\n").emit();
    server::log(server::Level::kInfo, "serving", {{"address", "0.0.0.0"}, {"port", 8443}});
  });
  const auto nl = out.find('\n');
  const std::string a = out.substr(0, nl), b = out.substr(nl + 1);
  EXPECT_EQ(a.rfind("{\"ts\":\"", 0), 0u) << a;
  EXPECT_NE(a.find("\",\"level\":\"info\",\"msg\":\"admission\",\"uid\":\"u\"}"), std::string::npos) << a;
  EXPECT_EQ(b.rfind("{\"ts\":\"", 0), 0u) << b;
  EXPECT_NE(b.find("\",\"level\":\"info\",\"msg\":\"serving\",\"address\":\"0.0.0.0\",\"port\":8443}\n"), std::string::npos) << b;
}

TEST(Log, LevelsComeFromOneTable) {
  EXPECT_EQ(server::log_level_names(), "debug, info, warn or error");
  EXPECT_EQ(server::parse_log_level("warn"), server::Level::kWarn);
  EXPECT_EQ(server::parse_log_level("debug"), server::Level::kDebug);
  EXPECT_FALSE(server::parse_log_level("WARN").has_value());
  EXPECT_FALSE(server::parse_log_level("").has_value());
}
