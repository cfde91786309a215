// Flag values shared by the subcommands: counts go through the one parser for counts.
#pragma once

#include <cstdint>
#include <string>

#include "sizing/quantity.h"

namespace shmguard::cli {

// A whole-number flag ("--batch-size 32"). False with `err` naming the flag when it is not one,
// or is 0 where that makes no sense.
inline bool count_flag(const std::string& flag, const std::string& text, bool allow_zero, std::uint64_t& out,
                       std::string& err) {
  auto v = sizing::parse_count(text);
  if (!v) {
    err = flag + ": expected a whole number, got \"" + text + "\"";
    return false;
  }
  if (*v == 0 && !allow_zero) {
    err = flag + ": must be at least 1";
    return false;
  }
  out = *v;
  return true;
}

}  // namespace shmguard::cli
