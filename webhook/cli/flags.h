// Flag values shared by the subcommands: counts go through the one parser for counts.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "sizing/quantity.h"

namespace shmguard::cli {

// A whole-number flag ("--batch-size 32"): a failure naming the flag when it is not one, or is 0
// where that makes no sense.
inline Result<std::uint64_t> count_flag(const std::string& flag, const std::string& text, bool allow_zero) {
  auto v = sizing::parse_count(text);
  if (!v) return Failure{flag + ": expected a whole number, got \"" + text + "\""};
  if (*v == 0 && !allow_zero) return Failure{flag + ": must be at least 1"};
  return *v;
}

}  // namespace shmguard::cli
