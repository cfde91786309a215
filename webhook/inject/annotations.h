// Every shmguard.io/ annotation, declared once (docs/sizing.md "Annotations"): its key, what its value is,
// whether it drives the size, and its help text; and the reading of a pod's values by the table.
// The reader here, the unknown-key and "did you mean" check in recognize.cpp, rule 3 of
// recognition, `shmguard --help` and a docs/sizing.md test all read this table, so a new
// annotation is one row here plus its use in the formula. Every key and the prefix are spelled
// here only (tests/e2e/test_layering.py refuses them written as literals anywhere else).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "inject/warnings.h"

namespace shmguard::inject {

// What every shmguard annotation's key starts with (an owner's annotations are inherited by it).
inline constexpr std::string_view kAnnotationPrefix = "shmguard.io/";
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

// The good values of the table's counts and quantities a pod carries, by key.
struct AnnotationValues {
  std::vector<std::pair<std::string_view, std::uint64_t>> read;
  std::optional<std::uint64_t> operator[](std::string_view key) const;  // a key of the table
};

// Every count and quantity of the table in `annotations` (null: none), read by its row's kind, in
// table order. A bad value is warned about in `w`, naming the annotation (so the offline path can
// point at its line), listed in `ignored` for the sizing text, and left out. (shmguard.io/inject
// is recognition's to read; the outputs are shmguard's own.)
AnnotationValues read_annotation_values(const nlohmann::json* annotations, Warnings& w,
                                        std::vector<std::string>& ignored);

// The annotations recognition and the sizing read: the pod's own, over its owner's shmguard.io/
// ones (`inherited`, null when the webhook found none; kept in `merged`). Null when there are none.
const nlohmann::json* effective_annotations(const nlohmann::json& pod, const nlohmann::json* inherited,
                                            nlohmann::json& merged);

}  // namespace shmguard::inject
