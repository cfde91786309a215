// Kubernetes quantity parsing and canonical formatting (see quantity.h).
#include "sizing/quantity.h"

#include <array>

namespace shmguard::sizing {
namespace {

__extension__ typedef unsigned __int128 u128;
constexpr u128 kCap = static_cast<u128>(1) << 100;  // far above 2^63, far below 2^128

u128 sat_mul(u128 a, u128 b, bool& sat) {
  if (a == 0 || b == 0) return 0;
  if (a > kCap / b) {
    sat = true;
    return kCap;
  }
  return a * b;
}

u128 pow_of(unsigned base, int exp, bool& sat) {
  u128 r = 1;
  for (int i = 0; i < exp; ++i) {
    r = sat_mul(r, base, sat);
    if (sat) return kCap;
  }
  return r;
}

struct Suffix {
  std::string_view text;
  int base;  // 2 or 10
  int exp;
};

constexpr std::array<Suffix, 16> kSuffixes{{
    {"Ki", 2, 10}, {"Mi", 2, 20}, {"Gi", 2, 30}, {"Ti", 2, 40}, {"Pi", 2, 50}, {"Ei", 2, 60},
    {"n", 10, -9}, {"u", 10, -6}, {"m", 10, -3}, {"", 10, 0}, {"k", 10, 3}, {"M", 10, 6},
    {"G", 10, 9}, {"T", 10, 12}, {"P", 10, 15}, {"E", 10, 18},
}};

ParsedQuantity fail(std::string why) {
  ParsedQuantity q;
  q.error = std::move(why);
  return q;
}

}  // namespace

ParsedQuantity parse_quantity(std::string_view text) {
  if (text.empty()) return fail("empty quantity");
  if (text.size() > 64) return fail("quantity longer than 64 characters");
  std::size_t i = 0;
  bool negative = false;
  if (text[i] == '+' || text[i] == '-') {
    negative = text[i] == '-';
    ++i;
  }
  // Number: digits, optional '.', digits (at least one digit overall).
  u128 mantissa = 0;
  bool sat = false;
  int digits = 0;
  int frac_digits = 0;
  bool seen_dot = false;
  bool nonzero = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c == '.') {
      if (seen_dot) return fail("more than one decimal point");
      seen_dot = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    ++digits;
    if (c != '0') nonzero = true;
    if (mantissa < (static_cast<u128>(1) << 96)) {
      mantissa = mantissa * 10 + static_cast<unsigned>(c - '0');
      if (seen_dot) ++frac_digits;
    } else if (!seen_dot) {
      // Too many integer digits to track exactly: the value is enormous anyway.
      sat = true;
    }
  }
  if (digits == 0) return fail("no digits");
  std::string_view rest = text.substr(i);
  int base = 10;
  int exp = 0;
  // Suffixes first: "Ei" and "E" are units, not exponents.
  bool found = false;
  for (const auto& s : kSuffixes) {
    if (rest == s.text) {
      base = s.base;
      exp = s.exp;
      found = true;
      break;
    }
  }
  if (!found && !rest.empty() && (rest[0] == 'e' || rest[0] == 'E')) {
    std::size_t j = 1;
    bool eneg = false;
    if (j < rest.size() && (rest[j] == '+' || rest[j] == '-')) {
      eneg = rest[j] == '-';
      ++j;
    }
    if (j == rest.size()) return fail("exponent without digits");
    int e = 0;
    for (; j < rest.size(); ++j) {
      if (rest[j] < '0' || rest[j] > '9') return fail("invalid exponent");
      e = e * 10 + (rest[j] - '0');
      if (e > 100) return fail("exponent out of range");
    }
    exp = eneg ? -e : e;
    found = true;
  }
  if (!found) {
    return fail("unknown suffix \"" + std::string(rest) +
                "\" (use Ki, Mi, Gi, Ti, Pi, Ei, k, M, G, T, P, E or an exponent)");
  }

  ParsedQuantity q;
  q.ok = true;
  if (negative && nonzero) {
    q.negative = true;
    return q;
  }
  // value = mantissa * 10^-frac * base^exp; compute num/den and round up.
  u128 num = mantissa;
  u128 den = 1;
  int e10 = -frac_digits;
  if (base == 10) {
    e10 += exp;
  } else {
    num = sat_mul(num, pow_of(2, exp, sat), sat);
  }
  if (e10 >= 0) {
    num = sat_mul(num, pow_of(10, e10, sat), sat);
  } else if (-e10 > 36) {
    // Denominator beyond any mantissa we track: a non-zero value is below one byte.
    num = nonzero ? 1 : 0;
  } else {
    bool dsat = false;
    den = pow_of(10, -e10, dsat);
  }
  u128 value = sat ? kCap : (num + den - 1) / den;
  constexpr u128 kMax63 = (static_cast<u128>(1) << 63) - 1;
  if (sat || value > kMax63) {
    q.saturated = true;
    q.bytes = static_cast<std::uint64_t>(kMax63);
  } else {
    q.bytes = static_cast<std::uint64_t>(value);
  }
  return q;
}

std::string format_quantity(std::uint64_t bytes) {
  static constexpr std::array<std::pair<int, const char*>, 6> kUnits{{
      {60, "Ei"}, {50, "Pi"}, {40, "Ti"}, {30, "Gi"}, {20, "Mi"}, {10, "Ki"}}};
  if (bytes == 0) return "0";
  for (const auto& [shift, name] : kUnits) {
    std::uint64_t unit = 1ULL << shift;
    if (bytes % unit == 0) return std::to_string(bytes / unit) + name;
  }
  return std::to_string(bytes);
}

std::uint64_t Saturating::mul(std::uint64_t a, std::uint64_t b) {
  u128 r = static_cast<u128>(a) * b;
  if (r > limit) {
    overflow = true;
    return limit;
  }
  return static_cast<std::uint64_t>(r);
}

std::uint64_t Saturating::add(std::uint64_t a, std::uint64_t b) {
  u128 r = static_cast<u128>(a) + b;
  if (r > limit) {
    overflow = true;
    return limit;
  }
  return static_cast<std::uint64_t>(r);
}

}  // namespace shmguard::sizing

namespace shmguard::sizing {
std::string format_human(std::uint64_t bytes) {
  if (bytes < kKi || bytes % kKi == 0) return format_quantity(bytes);
  static constexpr std::array<std::pair<int, const char*>, 6> kUnits{{
      {60, "Ei"}, {50, "Pi"}, {40, "Ti"}, {30, "Gi"}, {20, "Mi"}, {10, "Ki"}}};
  for (const auto& [shift, name] : kUnits) {
    std::uint64_t unit = 1ULL << shift;
    if (bytes >= unit) {
      std::uint64_t tenths = static_cast<std::uint64_t>(
          (static_cast<u128>(bytes) * 10 + unit / 2) / unit);
      return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + name;
    }
  }
  return std::to_string(bytes);
}
std::optional<std::uint64_t> parse_count(std::string_view text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  constexpr std::uint64_t kLimit = 1ULL << 62;
  std::uint64_t v = 0;
  for (char c : text) {
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
    if (v >= kLimit) return kLimit;
  }
  return v;
}

Result<std::uint64_t> parse_size(std::string_view text, SizeRules rules) {
  auto q = parse_quantity(text);
  if (!q.ok) return Result<std::uint64_t>::failure("is not a quantity (" + q.error + ")");
  if (q.negative) return Result<std::uint64_t>::failure("must not be negative");
  if (q.bytes == 0 && !rules.zero_ok) return Result<std::uint64_t>::failure("must be positive");
  if (q.saturated && !rules.saturate_ok) return Result<std::uint64_t>::failure("is too large (2^63 bytes or more)");
  return q.bytes;
}

}  // namespace shmguard::sizing

