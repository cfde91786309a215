// The strict JSON reader: agrees with nlohmann's parser on valid input, refuses what it refuses.
#include "admission/json_reader.h"

#include <gtest/gtest.h>

#include <random>

using namespace shmguard::admission;
using nlohmann::json;

namespace {
json read(std::string_view s) {
  json j;
  auto r = read_json(s, j, 128);
  EXPECT_TRUE(r.ok()) << s << ": " << r.error();
  return j;
}
bool refused(std::string_view s) {
  json j;
  return !read_json(s, j, 128).ok();
}
}  // namespace

TEST(JsonReader, AgreesWithNlohmannOnValidDocuments) {
  for (const char* s : {R"({"a":1,"b":[true,false,null],"c":{"d":"e"}})", "[]", "{}", "0", "-0", "-12",
                        "18446744073709551615", "18446744073709551616", "-9223372036854775809", "1.5e3",
                        "1E-2", "-0.0", R"("\u00e9\ud83d\ude00\n\t\"\\\/")", R"({"a":1,"a":2})",
                        " \r\n\t{ \"k\" : [ 1 , 2 ] } ", R"("ünïcödé 日本")", "[[[[[[1]]]]]]"}) {
    EXPECT_EQ(read(s), json::parse(s)) << s;
  }
}

TEST(JsonReader, RefusesInvalidJson) {
  for (const char* s : {"", " ", "{", "}", "[1,]", "{\"a\":}", "{\"a\" 1}", "{a:1}", "01", "1.", ".5", "+1",
                        "1e", "tru", "nul", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"",
                        "[1 2]", "{} {}", "\"\x01\"", "\"\xff\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "NaN"}) {
    EXPECT_TRUE(refused(s)) << "accepted: " << s;
  }
}

TEST(JsonReader, BoundsNesting) {
  std::string ok(100, '[');
  ok += std::string(100, ']');
  EXPECT_FALSE(refused(ok));
  std::string deep(129, '[');
  deep += std::string(129, ']');
  EXPECT_TRUE(refused(deep));
  json j;
  auto r = read_json(std::string(5000000, '['), j, 128);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error().find("nesting deeper than 128"), std::string::npos) << r.error();
}

TEST(JsonReader, RandomDocumentsRoundTrip) {
  std::mt19937 rng(7);
  auto random_json = [&](auto&& self, int depth) -> json {
    switch (rng() % (depth > 4 ? 4 : 6)) {
      case 0: return static_cast<std::int64_t>(rng()) - (1LL << 31);
      case 1: return std::uniform_real_distribution<double>(-1e6, 1e6)(rng);
      case 2: {
        std::string s;
        for (unsigned i = 0, n = rng() % 12; i < n; ++i) s += static_cast<char>(rng() % 96 + 32);
        if (rng() % 3 == 0) s += "\xc3\xa9\n\"\\";
        return s;
      }
      case 3: return rng() % 2 == 0 ? json(nullptr) : json(rng() % 2 == 0);
      case 4: {
        json a = json::array();
        for (unsigned i = 0, n = rng() % 5; i < n; ++i) a.push_back(self(self, depth + 1));
        return a;
      }
      default: {
        json o = json::object();
        for (unsigned i = 0, n = rng() % 5; i < n; ++i) o["k" + std::to_string(rng() % 100)] = self(self, depth + 1);
        return o;
      }
    }
  };
  for (int i = 0; i < 500; ++i) {
    json doc = random_json(random_json, 0);
    EXPECT_EQ(read(doc.dump()), doc);
    EXPECT_EQ(read(doc.dump(2)), doc);
  }
}

TEST(JsonReader, KeepBuildsOnlyListedKeysButValidatesAll) {
  const Keep item{{{"name", nullptr}}};
  const Keep list{{}, &item};
  const Keep root{{{"a", nullptr}, {"l", &list}}};
  json j;
  auto r = read_json(R"({"a":{"x":[1,2]},"b":{"deep":[{"y":"z"}]},"l":[{"name":"n","env":[1]},{"other":true}]})", j, 128,
                     &root);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(j, json::parse(R"({"a":{"x":[1,2]},"l":[{"name":"n"},{}]})"));
  // Skipped parts must still be valid JSON, and still count toward the nesting bound.
  EXPECT_FALSE(read_json(R"({"a":1,"b":[1,}]})", j, 128, &root).ok());
  EXPECT_FALSE(read_json(R"({"a":1,"b":"\xff"})", j, 128, &root).ok());
  std::string deep = R"({"b":)" + std::string(200, '[') + std::string(200, ']') + "}";
  EXPECT_FALSE(read_json(deep, j, 128, &root).ok());
}
