// Kubernetes quantity parsing and canonical formatting (see quantity.h).
#include "sizing/quantity.h"

#include <array>

#include "base/result.h"

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

}  // namespace

namespace {

// The decimal number at the front of a quantity: digits with at most one '.'.
struct Mantissa {
  u128 value = 0;
  int digits = 0, frac_digits = 0;
  bool saturated = false, nonzero = false;
  std::size_t end = 0;  // where the suffix starts
};

Result<Mantissa> read_mantissa(std::string_view text, std::size_t i) {
  Mantissa m;
  bool seen_dot = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c == '.') {
      if (seen_dot) return Failure{"more than one decimal point"};
      seen_dot = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    ++m.digits;
    if (c != '0') m.nonzero = true;
    if (m.value < (static_cast<u128>(1) << 96)) {
      m.value = m.value * 10 + static_cast<unsigned>(c - '0');
      if (seen_dot) ++m.frac_digits;
    } else if (!seen_dot) {
      m.saturated = true;  // too many integer digits to track exactly: the value is enormous anyway
    }
  }
  m.end = i;
  if (m.digits == 0) return Failure{"no digits"};
  return m;
}

// The suffix: a unit ("Ki", "G"; "Ei" and "E" are units, not exponents) or an exponent ("e9").
struct Scale {
  int base = 10;
  int exp = 0;
};
Result<Scale> read_suffix(std::string_view rest) {
  for (const auto& s : kSuffixes)
    if (rest == s.text) return Scale{s.base, s.exp};
  if (rest.empty() || (rest[0] != 'e' && rest[0] != 'E')) {
    return Failure{"unknown suffix \"" + std::string(rest) +
                      "\" (use Ki, Mi, Gi, Ti, Pi, Ei, k, M, G, T, P, E or an exponent)"};
  }
  std::size_t j = 1;
  const bool neg = j < rest.size() && rest[j] == '-';
  if (j < rest.size() && (rest[j] == '+' || rest[j] == '-')) ++j;
  if (j == rest.size()) return Failure{"exponent without digits"};
  int e = 0;
  for (; j < rest.size(); ++j) {
    if (rest[j] < '0' || rest[j] > '9') return Failure{"invalid exponent"};
    e = e * 10 + (rest[j] - '0');
    if (e > 100) return Failure{"exponent out of range"};
  }
  return Scale{10, neg ? -e : e};
}

// mantissa x 10^-frac x base^exp in bytes, rounded up; saturated past 2^63 - 1.
Quantity to_bytes(const Mantissa& m, int base, int exp) {
  bool sat = m.saturated;
  u128 num = m.value;
  u128 den = 1;
  int e10 = -m.frac_digits;
  if (base == 10) e10 += exp;
  else num = sat_mul(num, pow_of(2, exp, sat), sat);
  if (e10 >= 0) {
    num = sat_mul(num, pow_of(10, e10, sat), sat);
  } else if (-e10 > 36) {
    num = m.nonzero ? 1 : 0;  // a denominator beyond any tracked mantissa: a non-zero value is below one byte
  } else {
    bool dsat = false;
    den = pow_of(10, -e10, dsat);
  }
  const u128 value = sat ? kCap : (num + den - 1) / den;
  constexpr u128 kMax63 = (static_cast<u128>(1) << 63) - 1;
  Quantity q;
  q.saturated = sat || value > kMax63;
  q.bytes = static_cast<std::uint64_t>(q.saturated ? kMax63 : value);
  return q;
}

}  // namespace

Result<Quantity> parse_quantity(std::string_view text) {
  if (text.empty()) return Failure{"empty quantity"};
  if (text.size() > 64) return Failure{"quantity longer than 64 characters"};
  const bool signed_ = text[0] == '+' || text[0] == '-';
  const bool negative = text[0] == '-';
  auto m = read_mantissa(text, signed_ ? 1 : 0);
  if (!m) return Failure{m.error()};
  auto suffix = read_suffix(text.substr(m->end));
  if (!suffix) return Failure{suffix.error()};
  if (negative && m->nonzero) return Quantity{.negative = true};
  return to_bytes(*m, suffix->base, suffix->exp);
}

// The binary units, largest first, as the shift that makes each.
constexpr std::array<std::pair<int, const char*>, 6> kBinaryUnits{{
    {60, "Ei"}, {50, "Pi"}, {40, "Ti"}, {30, "Gi"}, {20, "Mi"}, {10, "Ki"}}};

std::string format_quantity(std::uint64_t bytes) {
  if (bytes == 0) return "0";
  for (const auto& [shift, name] : kBinaryUnits) {
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

std::string format_human(std::uint64_t bytes) {
  if (bytes < kKi || bytes % kKi == 0) return format_quantity(bytes);
  for (const auto& [shift, name] : kBinaryUnits) {
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
  std::uint64_t v = 0;
  for (char c : text) {
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
    if (v >= kArithmeticLimit) return kArithmeticLimit;
  }
  return v;
}

Result<std::uint64_t> parse_size(std::string_view text, SizeRules rules) {
  auto q = parse_quantity(text);
  if (!q) return Failure{"is not a quantity (" + q.error() + ")"};
  if (q->negative) return Failure{"must not be negative"};
  if (q->bytes == 0 && !rules.zero_ok) return Failure{"must be positive"};
  if (q->saturated && !rules.saturate_ok) return Failure{"is too large (2^63 bytes or more)"};
  return q->bytes;
}

}  // namespace shmguard::sizing

