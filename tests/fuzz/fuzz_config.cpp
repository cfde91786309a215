// Fuzz target: the config loader; accepted configs must be internally consistent.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto r = shmguard::config::parse_config(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!r.ok()) {
    if (r.error().empty()) std::abort();
    return 0;
  }
  const auto& s = (*r).sizing;
  if (s.min == 0 || s.min > s.max || s.default_size < s.min || s.default_size > s.max) std::abort();
  return 0;
}
