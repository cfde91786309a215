// Strict JSON reader (see json_reader.h).
#include "admission/json_reader.h"

#include "base/limits.h"

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace shmguard::admission {
namespace {

using nlohmann::json;

struct Fail {
  const char* what;
  std::size_t at;
};

class Reader {
 public:
  Reader(std::string_view s, std::size_t max_depth) : p_(s.data()), b_(s.data()), e_(s.data() + s.size()), max_depth_(max_depth) {}

  void document(json& out, const Keep* keep) {
    ws();
    value(out, 0, keep);
    ws();
    if (p_ != e_) fail("unexpected data after the JSON value");
  }

 private:
  const char* p_;
  const char* b_;
  const char* e_;
  std::size_t max_depth_;
  std::string scratch_;

  [[noreturn]] void fail(const char* what) { throw Fail{what, static_cast<std::size_t>(p_ - b_)}; }

  void ws() {
    while (p_ != e_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  void expect_word(const char* w, std::size_t n) {
    if (static_cast<std::size_t>(e_ - p_) < n || std::memcmp(p_, w, n) != 0) fail("invalid literal");
    p_ += n;
  }

  void value(json& out, std::size_t depth, const Keep* keep) {
    if (p_ == e_) fail("unexpected end of input");
    switch (*p_) {
      case '{': object(out, depth + 1, keep); return;
      case '[': array(out, depth + 1, keep); return;
      case '"': {
        out = json::value_t::string;
        string(out.get_ref<std::string&>());
        return;
      }
      case 't': expect_word("true", 4); out = true; return;
      case 'f': expect_word("false", 5); out = false; return;
      case 'n': expect_word("null", 4); out = nullptr; return;
      default: number(out); return;
    }
  }

  // Parses and validates a value without building it.
  void skip(std::size_t depth) {
    if (p_ == e_) fail("unexpected end of input");
    switch (*p_) {
      case '{':
      case '[': {
        if (depth + 1 > max_depth_) fail(kNestingError);
        const char close = *p_ == '{' ? '}' : ']';
        const bool obj = *p_ == '{';
        ++p_;
        ws();
        if (p_ != e_ && *p_ == close) {
          ++p_;
          return;
        }
        for (;;) {
          ws();
          if (obj) {
            if (p_ == e_ || *p_ != '"') fail("expected a string key");
            skip_string();
            ws();
            if (p_ == e_ || *p_ != ':') fail("expected ':'");
            ++p_;
            ws();
          }
          skip(depth + 1);
          ws();
          if (p_ == e_) fail("unexpected end of input");
          if (*p_ == ',') {
            ++p_;
            continue;
          }
          if (*p_ == close) {
            ++p_;
            return;
          }
          fail(obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
      }
      case '"': skip_string(); return;
      default: {
        json scratch;
        value(scratch, depth, nullptr);
      }
    }
  }

  void skip_string() {
    scratch_.clear();
    string(scratch_);
  }

  void object(json& out, std::size_t depth, const Keep* keep) {
    if (depth > max_depth_) fail(kNestingError);
    ++p_;
    out = json::value_t::object;
    ws();
    if (p_ != e_ && *p_ == '}') {
      ++p_;
      return;
    }
    std::string key;
    for (;;) {
      ws();
      if (p_ == e_ || *p_ != '"') fail("expected a string key");
      key.clear();
      string(key);
      ws();
      if (p_ == e_ || *p_ != ':') fail("expected ':'");
      ++p_;
      ws();
      const Keep* child = nullptr;
      if (keep && !keep->listed(key, child)) {
        skip(depth);
      } else {
        json& slot = out[key];  // a duplicate key keeps the last value, as nlohmann does
        value(slot, depth, child);
      }
      ws();
      if (p_ == e_) fail("unexpected end of input in an object");
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == '}') {
        ++p_;
        return;
      }
      fail("expected ',' or '}'");
    }
  }

  void array(json& out, std::size_t depth, const Keep* keep) {
    if (depth > max_depth_) fail(kNestingError);
    ++p_;
    out = json::value_t::array;
    ws();
    if (p_ != e_ && *p_ == ']') {
      ++p_;
      return;
    }
    auto& vec = out.get_ref<json::array_t&>();
    for (;;) {
      ws();
      vec.emplace_back();
      value(vec.back(), depth, keep ? keep->items : nullptr);
      ws();
      if (p_ == e_) fail("unexpected end of input in an array");
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == ']') {
        ++p_;
        return;
      }
      fail("expected ',' or ']'");
    }
  }

  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  unsigned hex4() {
    if (e_ - p_ < 4) fail("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      int h = hex(p_[i]);
      if (h < 0) fail("invalid \\u escape");
      v = (v << 4) | static_cast<unsigned>(h);
    }
    p_ += 4;
    return v;
  }

  static void utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // Validates one UTF-8 sequence starting at p_ (a byte >= 0x80) and returns its length.
  std::size_t utf8_len() {
    auto u = [&](std::ptrdiff_t i) { return static_cast<unsigned char>(p_[i]); };
    unsigned char c = u(0);
    std::ptrdiff_t left = e_ - p_;
    auto cont = [&](std::ptrdiff_t i) { return i < left && (u(i) & 0xC0) == 0x80; };
    if (c >= 0xC2 && c <= 0xDF && cont(1)) return 2;
    if (c == 0xE0 && cont(1) && u(1) >= 0xA0 && cont(2)) return 3;
    if (((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) && cont(1) && cont(2)) return 3;
    if (c == 0xED && cont(1) && u(1) <= 0x9F && cont(2)) return 3;
    if (c == 0xF0 && cont(1) && u(1) >= 0x90 && cont(2) && cont(3)) return 4;
    if (c >= 0xF1 && c <= 0xF3 && cont(1) && cont(2) && cont(3)) return 4;
    if (c == 0xF4 && cont(1) && u(1) <= 0x8F && cont(2) && cont(3)) return 4;
    fail("invalid UTF-8 in a string");
  }

  void string(std::string& out) {
    ++p_;  // opening quote
    for (;;) {
      const char* run = p_;
      while (p_ != e_) {
        auto c = static_cast<unsigned char>(*p_);
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        ++p_;
      }
      out.append(run, static_cast<std::size_t>(p_ - run));
      if (p_ == e_) fail("unterminated string");
      auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return;
      }
      if (c < 0x20) fail("control character in a string");
      if (c >= 0x80) {
        std::size_t n = utf8_len();
        out.append(p_, n);
        p_ += n;
        continue;
      }
      // Escape sequence.
      ++p_;
      if (p_ == e_) fail("unterminated escape");
      char esc = *p_++;
      switch (esc) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (e_ - p_ < 6 || p_[0] != '\\' || p_[1] != 'u') fail("unpaired surrogate");
            p_ += 2;
            unsigned lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("invalid low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("unpaired surrogate");
          }
          utf8(out, cp);
          break;
        }
        default: fail("invalid escape");
      }
    }
  }

  void number(json& out) {
    const char* start = p_;
    bool neg = false;
    if (p_ != e_ && *p_ == '-') {
      neg = true;
      ++p_;
    }
    if (p_ == e_ || *p_ < '0' || *p_ > '9') fail("invalid value");
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ != e_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    bool is_float = false;
    if (p_ != e_ && *p_ == '.') {
      is_float = true;
      ++p_;
      if (p_ == e_ || *p_ < '0' || *p_ > '9') fail("invalid number");
      while (p_ != e_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ != e_ && (*p_ == 'e' || *p_ == 'E')) {
      is_float = true;
      ++p_;
      if (p_ != e_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == e_ || *p_ < '0' || *p_ > '9') fail("invalid number");
      while (p_ != e_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (!is_float) {
      if (neg) {
        std::int64_t v = 0;
        auto r = std::from_chars(start, p_, v);
        if (r.ec == std::errc() && r.ptr == p_) {
          out = v;
          return;
        }
      } else {
        std::uint64_t v = 0;
        auto r = std::from_chars(start, p_, v);
        if (r.ec == std::errc() && r.ptr == p_) {
          out = v;
          return;
        }
      }
    }
    // Floats, and integers too large for 64 bits (as nlohmann does).
    std::string tmp(start, p_);
    out = std::strtod(tmp.c_str(), nullptr);
  }
};

}  // namespace

bool Keep::listed(std::string_view key, const Keep*& child) const {
  for (const auto& [k, c] : keys) {
    if (k == key) {
      child = c;
      return true;
    }
  }
  return false;
}

Status read_json(std::string_view text, nlohmann::json& out, std::size_t max_depth, const Keep* keep) {
  try {  // Fail is this file's own: the reader unwinds any depth with it, and it stops here
    Reader reader(text, max_depth);
    reader.document(out, keep);
    return Ok{};
  } catch (const Fail& f) {
    out = nullptr;
    return Failure{std::string(f.what) + " at byte " + std::to_string(f.at)};
  }
}

}  // namespace shmguard::admission
