// Every shmguard.io/ annotation, declared once (docs/sizing.md "Annotations"): its key, what its value is,
// whether it drives the size, and its help text. The readers in inject.cpp, the unknown-key and
// "did you mean" check in recognize.cpp, rule 3 of recognition, `shmguard --help` and a docs/sizing.md
// test all read this table, so a new annotation is one row here plus its use in the formula.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace shmguard::inject {

inline constexpr std::string_view kInjectKey = "shmguard.io/inject";
inline constexpr std::string_view kBatchSizeKey = "shmguard.io/batch-size";
inline constexpr std::string_view kNumWorkersKey = "shmguard.io/num-workers";
inline constexpr std::string_view kSampleSizeKey = "shmguard.io/sample-size";
inline constexpr std::string_view kPrefetchKey = "shmguard.io/prefetch-factor";
inline constexpr std::string_view kProcsKey = "shmguard.io/procs-per-pod";
inline constexpr std::string_view kSizeKey = "shmguard.io/size";
inline constexpr std::string_view kInjectedSizeKey = "shmguard.io/injected-size";
inline constexpr std::string_view kSizingKey = "shmguard.io/sizing";

enum class AnnotationKind {
  kBool,      // "true" / "false"
  kCount,     // a whole number
  kQuantity,  // bytes or a Kubernetes quantity
  kOutput,    // written by shmguard, read back only to stay idempotent
};

struct AnnotationSpec {
  std::string_view key;
  AnnotationKind kind;
  bool sizing = false;      // an input of the size: its presence makes the pod a training pod
  bool allow_zero = false;  // counts: 0 is meaningful (num-workers)
  std::string_view help;
  std::string_view example;
};

// In docs/sizing.md order.
const std::vector<AnnotationSpec>& annotation_table();

// The row for `key`, or null for a key shmguard does not know.
const AnnotationSpec* find_annotation(std::string_view key);

// The annotations a user sets, a line each with its help: what `shmguard --help` prints.
std::string annotation_help();

}  // namespace shmguard::inject
