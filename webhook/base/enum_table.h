// A closed set's table: one row per enumerator, written `{.key = E::kX, .name = "x", ...}` in the
// enum's order, so a row is found by index and a missing or misplaced row fails to compile:
//   static_assert(in_enum_order(kTable, &Row::key, static_cast<std::size_t>(E::kCount)));
#pragma once

#include <cstddef>

namespace shmguard {

template <class Row, std::size_t N, class Enum>
constexpr bool in_enum_order(const Row (&rows)[N], Enum Row::*key, std::size_t count) {
  if (N != count) return false;
  for (std::size_t i = 0; i < N; ++i)
    if (rows[i].*key != static_cast<Enum>(i)) return false;
  return true;
}

}  // namespace shmguard
