// Bounds every parser of untrusted input shares, so that the webhook and the offline commands
// refuse the same documents, in the same words, long before a recursion can exhaust the stack.
#pragma once

#include <cstddef>

namespace shmguard {

// Objects and lists nested in one document (a Kubernetes pod nests about 10 deep).
inline constexpr std::size_t kMaxNesting = 128;
inline constexpr const char* kNestingError = "nesting deeper than 128";  // says kMaxNesting

}  // namespace shmguard
