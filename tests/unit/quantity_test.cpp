// Kubernetes quantity parsing and canonical formatting.
#include "sizing/quantity.h"

#include <gtest/gtest.h>

using namespace shmguard::sizing;

namespace {
std::uint64_t bytes(const char* q) {
  auto r = parse_quantity(q);
  EXPECT_TRUE(r.ok()) << q << ": " << r.error();
  if (!r) return 0;
  EXPECT_FALSE(r->negative) << q;
  return r->bytes;
}
}  // namespace

TEST(Quantity, BinarySuffixes) {
  EXPECT_EQ(bytes("1Ki"), 1024u);
  EXPECT_EQ(bytes("1Gi"), kGi);
  EXPECT_EQ(bytes("1536Mi"), 1536 * kMi);
  EXPECT_EQ(bytes("2Ti"), 2 * kTi);
  EXPECT_EQ(bytes("1Pi"), 1024 * kTi);
  EXPECT_EQ(bytes("1Ei"), 1024ULL * 1024 * kTi);
}

TEST(Quantity, DecimalSuffixesAndExponents) {
  EXPECT_EQ(bytes("1.5G"), 1500000000u);
  EXPECT_EQ(bytes("500M"), 500000000u);
  EXPECT_EQ(bytes("1e9"), 1000000000u);
  EXPECT_EQ(bytes("1E3"), 1000u);
  EXPECT_EQ(bytes("2k"), 2000u);
  EXPECT_EQ(bytes("3T"), 3000000000000u);
  EXPECT_EQ(bytes("1e+2"), 100u);
  EXPECT_EQ(bytes("1024"), 1024u);
  EXPECT_EQ(bytes("+5"), 5u);
}

TEST(Quantity, FractionsRoundUpToWholeBytes) {
  EXPECT_EQ(bytes("0.5Gi"), kGi / 2);
  EXPECT_EQ(bytes("1.5Ki"), 1536u);
  EXPECT_EQ(bytes("500m"), 1u);      // half a byte rounds up, as Quantity.Value() does
  EXPECT_EQ(bytes("1500m"), 2u);
  EXPECT_EQ(bytes("1e-3"), 1u);
  EXPECT_EQ(bytes("0.1"), 1u);
  EXPECT_EQ(bytes("0"), 0u);
  EXPECT_EQ(bytes("0.0Gi"), 0u);
  EXPECT_EQ(bytes(".5Ki"), 512u);
}

TEST(Quantity, RejectsWithAReason) {
  const std::string suffixes = " (use Ki, Mi, Gi, Ti, Pi, Ei, k, M, G, T, P, E or an exponent)";
  const std::pair<const char*, std::string> cases[] = {
      {"", "empty quantity"},
      {"Gi", "no digits"},
      {"1GB", "unknown suffix \"GB\"" + suffixes},
      {"1gi", "unknown suffix \"gi\"" + suffixes},
      {"1.2.3", "more than one decimal point"},
      {"abc", "no digits"},
      {"1 Gi", "unknown suffix \" Gi\"" + suffixes},
      {"1e", "exponent without digits"},
      {"1e1.5", "invalid exponent"},
      {"--1", "no digits"},
      {"1Gi ", "unknown suffix \"Gi \"" + suffixes},
      {"0x10", "unknown suffix \"x10\"" + suffixes},
      {"1e1000", "exponent out of range"},
  };
  for (const auto& [bad, why] : cases) {
    auto r = parse_quantity(bad);
    ASSERT_FALSE(r.ok()) << "accepted \"" << bad << "\"";
    EXPECT_EQ(r.error(), why) << bad;
  }
}

TEST(Quantity, NegativeIsFlagged) {
  auto r = parse_quantity("-1Gi");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->negative);
  EXPECT_FALSE(parse_quantity("-0")->negative);
}

TEST(Quantity, HugeValuesSaturate) {
  for (const char* huge : {"1e30", "99999999999999999999999999Ei", "9223372036854775808", "16Ei"}) {
    auto r = parse_quantity(huge);
    ASSERT_TRUE(r.ok()) << huge << ": " << r.error();
    EXPECT_TRUE(r->saturated) << huge;
    EXPECT_EQ(r->bytes, (1ULL << 63) - 1);
  }
  EXPECT_FALSE(parse_quantity("7Ei")->saturated);
  EXPECT_FALSE(parse_quantity("1e1000").ok());  // exponent out of range is an error, not a hang (above)
}

TEST(Quantity, CanonicalFormatIsLargestExactBinaryUnit) {
  EXPECT_EQ(format_quantity(8 * kGi), "8Gi");
  EXPECT_EQ(format_quantity(8706 * kMi), "8706Mi");
  EXPECT_EQ(format_quantity(1280 * kMi), "1280Mi");
  EXPECT_EQ(format_quantity(1080 * kMi), "1080Mi");
  EXPECT_EQ(format_quantity(1536 * kKi), "1536Ki");
  EXPECT_EQ(format_quantity(1025), "1025");
  EXPECT_EQ(format_quantity(0), "0");
  EXPECT_EQ(format_quantity(kTi), "1Ti");
}

TEST(Quantity, FormatThenParseRoundTrips) {
  for (std::uint64_t v : std::initializer_list<std::uint64_t>{1, 1023, 1024, 3 * kMi + 4 * kKi, 64 * kGi, 12345678901ULL}) {
    EXPECT_EQ(bytes(format_quantity(v).c_str()), v);
  }
}

TEST(Quantity, HumanFormatForExplanations) {
  EXPECT_EQ(format_human(16 * kMi), "16Mi");
  EXPECT_EQ(format_human(kGi + kGi / 10 * 2 + 1), "1.2Gi");
  EXPECT_EQ(format_human(100), "100");
}

TEST(Saturating, ClampsAndFlags) {
  Saturating s{1000};
  EXPECT_EQ(s.mul(10, 10), 100u);
  EXPECT_FALSE(s.overflow);
  EXPECT_EQ(s.mul(100, 100), 1000u);
  EXPECT_TRUE(s.overflow);
  Saturating t{1000};
  EXPECT_EQ(t.add(999, 2), 1000u);
  EXPECT_TRUE(t.overflow);
}

TEST(ParseSize, TheOneRuleForUserSizes) {
  using shmguard::sizing::parse_size;
  EXPECT_EQ(*parse_size("1Gi"), 1ULL << 30);
  EXPECT_EQ(parse_size("0").error(), "must be positive");
  EXPECT_EQ(*parse_size("0", {.zero_ok = true}), 0u);
  EXPECT_EQ(parse_size("-1Mi").error(), "must not be negative");
  EXPECT_EQ(parse_size("9Ei").error(), "is too large (2^63 bytes or more)");
  EXPECT_TRUE(parse_size("9Ei", {.saturate_ok = true}).ok());
  EXPECT_EQ(parse_size("lots").error().rfind("is not a quantity (", 0), 0u);
}
