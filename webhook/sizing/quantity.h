// Kubernetes resource quantities: parse every form the API accepts, format sizes canonically.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace shmguard::sizing {

// Sizes and counts are bounded well below 2^63 so every intermediate fits; anything above saturates.
inline constexpr std::uint64_t kArithmeticLimit = 1ULL << 62;

constexpr std::uint64_t kKi = 1024ULL;
constexpr std::uint64_t kMi = kKi * 1024ULL;
constexpr std::uint64_t kGi = kMi * 1024ULL;
constexpr std::uint64_t kTi = kGi * 1024ULL;

// A quantity as a byte count.
struct Quantity {
  std::uint64_t bytes = 0;   // rounded up to whole bytes; saturated when `saturated`
  bool saturated = false;    // the value did not fit in 63 bits
  bool negative = false;     // a syntactically valid but negative quantity (bytes is 0)
};

// Parses a Kubernetes quantity ("1Gi", "1536Mi", "1.5G", "1e9", "500M", "0.5Gi", "1024")
// into bytes. Fractions of a byte round up, as resource.Quantity.Value() does.
// Never throws; a failure says what is wrong with the text. Negative values parse, with
// `negative` set, so callers can reject them with their own wording (parse_size does).
Result<Quantity> parse_quantity(std::string_view text);

// What a size given by a user may be besides positive and below 2^63 bytes.
struct SizeRules {
  bool zero_ok = false;      // config's base and ncclPerProcess may be 0
  bool saturate_ok = false;  // annotations: absurd values saturate (the formula clamps to max, with a warning)
};

// The one rule for sizes a user gives (flags, config, annotations, observe): a Kubernetes
// quantity, not negative, not zero and not past 2^63 bytes unless `rules` allow it. The error
// says what is wrong with the value, without naming the field (each caller adds its own name).
Result<std::uint64_t> parse_size(std::string_view text, SizeRules rules = {});

// A count (batch size, workers, ...): decimal digits only, no sign. Values past 2^62 saturate
// there (the formula clamps them); std::nullopt when the text is not a whole number. The one
// parser for counts in annotations, flags and the config file.
std::optional<std::uint64_t> parse_count(std::string_view text);

// Formats bytes with the largest binary suffix that divides it exactly
// ("8Gi", "1280Mi", "1536Ki"); plain digits when not a multiple of 1Ki.
std::string format_quantity(std::uint64_t bytes);

// Saturating arithmetic used by the formula; `overflow` is set once any step saturates.
struct Saturating {
  std::uint64_t limit;
  bool overflow = false;
  std::uint64_t mul(std::uint64_t a, std::uint64_t b);
  std::uint64_t add(std::uint64_t a, std::uint64_t b);
};

}  // namespace shmguard::sizing

namespace shmguard::sizing {
// For explanations: the canonical form when it is exact to 1Ki, else "117.7Mi"-style.
std::string format_human(std::uint64_t bytes);
}  // namespace shmguard::sizing
