// Fuzz target: the quantity parser; a value it accepts must survive format -> parse unchanged.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sizing/quantity.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto q = shmguard::sizing::parse_quantity(text);
  if (!q) {
    if (q.error().empty()) std::abort();
    return 0;
  }
  if (q->negative || q->saturated) return 0;
  auto again = shmguard::sizing::parse_quantity(shmguard::sizing::format_quantity(q->bytes));
  if (!again || again->bytes != q->bytes) std::abort();
  return 0;
}
