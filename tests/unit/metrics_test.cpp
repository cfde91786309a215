// The webhook's metrics as Prometheus text (server/metrics.h): every series' exact line, counters
// that count, label values escaped as the exposition format asks, histograms cumulative, and a
// text Prometheus's parser would take (HELP and TYPE before each family's samples, no series twice).
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "version.h"

using shmguard::server::Histogram;
using shmguard::server::Metrics;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

bool has_line(const std::string& text, const std::string& line) {
  for (const auto& l : lines_of(text))
    if (l == line) return true;
  return false;
}

// The lines of `text` whose series name is `name` (with or without labels).
std::vector<std::string> series(const std::string& text, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& l : lines_of(text))
    if (l.rfind(name + "{", 0) == 0 || l.rfind(name + " ", 0) == 0) out.push_back(l);
  return out;
}

// The count of `name`'s bucket whose `le` reads back as `le` ("5e-04" and "0.0005" alike), or -1.
long long bucket(const std::string& text, const std::string& name, double le) {
  const std::regex line(name + R"re(_bucket\{le="([^"]+)"\} (\d+))re");
  for (const auto& l : lines_of(text)) {
    std::smatch m;
    if (std::regex_match(l, m, line) && m[1] != "+Inf" && std::stod(m[1]) == le) return std::stoll(m[2]);
  }
  return -1;
}

}  // namespace

TEST(Metrics, AdmissionsCountedByDecisionAndReason) {
  Metrics m;
  m.admission("injected", "injected", 0.25, 8ull << 30);
  m.admission("injected", "injected", 0.25, 8ull << 30);
  m.admission("skipped", "not-training", 0.001, 0);
  const std::string text = m.render();
  EXPECT_EQ(series(text, "shmguard_admissions_total"),
            (std::vector<std::string>{"shmguard_admissions_total{decision=\"injected\",reason=\"injected\"} 2",
                                      "shmguard_admissions_total{decision=\"skipped\",reason=\"not-training\"} 1"}));
  // Latency: 0.25 s twice, 1 ms once; cumulative buckets.
  EXPECT_EQ(bucket(text, "shmguard_admission_duration_seconds", 0.0001), 0);
  EXPECT_EQ(bucket(text, "shmguard_admission_duration_seconds", 0.0005), 0);
  EXPECT_EQ(bucket(text, "shmguard_admission_duration_seconds", 0.001), 1) << "a bound holds what equals it";
  EXPECT_EQ(bucket(text, "shmguard_admission_duration_seconds", 0.1), 1);
  EXPECT_EQ(bucket(text, "shmguard_admission_duration_seconds", 0.5), 3);
  EXPECT_EQ(bucket(text, "shmguard_admission_duration_seconds", 1), 3);
  EXPECT_TRUE(has_line(text, "shmguard_admission_duration_seconds_bucket{le=\"0.0001\"} 0")) << "no exponent form";
  EXPECT_TRUE(has_line(text, "shmguard_admission_duration_seconds_bucket{le=\"0.0005\"} 0"));
  EXPECT_TRUE(has_line(text, "shmguard_admission_duration_seconds_bucket{le=\"+Inf\"} 3"));
  EXPECT_TRUE(has_line(text, "shmguard_admission_duration_seconds_sum 0.501"));
  EXPECT_TRUE(has_line(text, "shmguard_admission_duration_seconds_count 3"));
  // Sizes: only the injected ones (8 GiB) are observed.
  EXPECT_EQ(bucket(text, "shmguard_injected_size_bytes", 4294967296.0), 0);
  EXPECT_EQ(bucket(text, "shmguard_injected_size_bytes", 8589934592.0), 2);
  EXPECT_TRUE(has_line(text, "shmguard_injected_size_bytes_count 2"));
}

TEST(Metrics, LabelValuesAreEscaped) {
  Metrics m;
  m.admission("errored", "a \"quoted\" back\\slash\nnew line", 0.001, 0);
  m.tls_handshake_failure("tlsv1 alert unknown ca");
  m.tls_handshake_failure("say \"hi\"");
  m.owner_lookup("not\\found", false);
  const std::string text = m.render();
  EXPECT_TRUE(has_line(text, R"(shmguard_admissions_total{decision="errored",reason="a \"quoted\" back\\slash\nnew line"} 1)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(shmguard_tls_handshake_failures_total{reason="say \"hi\""} 1)"));
  EXPECT_TRUE(has_line(text, R"(shmguard_tls_handshake_failures_total{reason="tlsv1 alert unknown ca"} 1)"));
  EXPECT_TRUE(has_line(text, R"(shmguard_owner_lookups_total{result="not\\found",source="api"} 1)"));
}

TEST(Metrics, HttpOwnerLookupsTlsAndReloads) {
  Metrics m;
  m.http_response(200);
  m.http_response(200);
  m.http_response(415);
  m.owner_lookup("found", false);
  m.owner_lookup("found", true);
  m.owner_lookup("found", true);
  m.tls_handshake_failure("http request");
  m.tls_handshake_failure("http request");
  m.cert_reload(true);
  m.cert_reload(false);
  m.cert_reload(false);
  m.config_reload(true);
  m.set_cert_expiry(1767225600);
  const std::string text = m.render();
  EXPECT_EQ(series(text, "shmguard_http_responses_total"),
            (std::vector<std::string>{"shmguard_http_responses_total{code=\"200\"} 2",
                                      "shmguard_http_responses_total{code=\"415\"} 1"}));
  EXPECT_EQ(series(text, "shmguard_owner_lookups_total"),
            (std::vector<std::string>{"shmguard_owner_lookups_total{result=\"found\",source=\"api\"} 1",
                                      "shmguard_owner_lookups_total{result=\"found\",source=\"cache\"} 2"}));
  EXPECT_EQ(series(text, "shmguard_tls_handshake_failures_total"),
            (std::vector<std::string>{"shmguard_tls_handshake_failures_total{reason=\"http request\"} 2"}));
  EXPECT_EQ(series(text, "shmguard_certificate_reloads_total"),
            (std::vector<std::string>{"shmguard_certificate_reloads_total{result=\"ok\"} 1",
                                      "shmguard_certificate_reloads_total{result=\"failed\"} 2"}));
  EXPECT_EQ(series(text, "shmguard_config_reloads_total"),
            (std::vector<std::string>{"shmguard_config_reloads_total{result=\"ok\"} 1",
                                      "shmguard_config_reloads_total{result=\"failed\"} 0"}));
  EXPECT_EQ(series(text, "shmguard_certificate_expiry_timestamp_seconds"),
            (std::vector<std::string>{"shmguard_certificate_expiry_timestamp_seconds 1767225600"}));
  EXPECT_EQ(series(text, "shmguard_build_info"),
            (std::vector<std::string>{std::string("shmguard_build_info{version=\"") + SHMGUARD_VERSION + "\"} 1"}));
}

TEST(Metrics, NothingCountedYetIsStillAValidExposition) {
  const std::string text = Metrics().render();
  EXPECT_TRUE(series(text, "shmguard_admissions_total").empty()) << "no sample until a first admission";
  EXPECT_TRUE(has_line(text, "# TYPE shmguard_admissions_total counter"));
  EXPECT_TRUE(has_line(text, "shmguard_admission_duration_seconds_count 0"));
  EXPECT_TRUE(has_line(text, "shmguard_certificate_expiry_timestamp_seconds 0"));
}

TEST(Metrics, TheTextParsesAsTheExpositionFormat) {
  Metrics m;
  m.admission("injected", "injected", 0.002, 1ull << 30);
  m.admission("errored", "x\"y\\z\nw", 0.002, 0);
  m.http_response(200);
  m.owner_lookup("none", true);
  m.tls_handshake_failure("connection reset");
  const std::string text = m.render();
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  // name{label="value",...} number; a value: any character but an unescaped quote, backslash or newline.
  const std::regex sample(R"re(([a-z_]+)(\{([a-z_]+="([^"\\\n]|\\[\\"n])*")(,[a-z_]+="([^"\\\n]|\\[\\"n])*")*\})? (\+Inf|[-+0-9.e]+))re");
  const std::regex comment(R"(# (HELP|TYPE) ([a-z_]+) .+)");
  std::set<std::string> typed, seen;
  std::string family;
  for (const auto& l : lines_of(text)) {
    std::smatch mt;
    if (std::regex_match(l, mt, comment)) {
      if (mt[1] == "TYPE") {
        EXPECT_TRUE(typed.insert(mt[2]).second) << "TYPE twice: " << l;
        family = mt[2];
      }
      continue;
    }
    ASSERT_TRUE(std::regex_match(l, mt, sample)) << "not a sample line: " << l;
    const std::string name = mt[1];
    EXPECT_EQ(name.rfind(family, 0), 0u) << l << " outside its family " << family;
    const std::string key = l.substr(0, l.rfind(' '));
    EXPECT_TRUE(seen.insert(key).second) << "series twice: " << key;
  }
  EXPECT_EQ(typed.size(), 10u);
}

TEST(Histogram, BoundsAreInclusiveAndTheSumExact) {
  Histogram h({1, 2.5});
  for (double v : {0.5, 1.0, 2.5, 2.75, 100.0}) h.observe(v);
  std::string out;
  h.render("x", out);
  EXPECT_EQ(out, "x_bucket{le=\"1\"} 2\nx_bucket{le=\"2.5\"} 3\nx_bucket{le=\"+Inf\"} 5\nx_sum 106.75\nx_count 5\n");
}
