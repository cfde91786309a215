// The annotation table (see annotations.h).
#include "inject/annotations.h"

#ifndef SHMGUARD_TEST_ANNOTATION_ROWS
#define SHMGUARD_TEST_ANNOTATION_ROWS
#endif

namespace shmguard::inject {

const std::vector<AnnotationSpec>& annotation_table() {
  using K = AnnotationKind;
  static const std::vector<AnnotationSpec> table{
      {.key = kInjectKey, .kind = K::kBool,
       .help = "`\"true\"` forces injection, `\"false\"` opts out (label or annotation)", .example = "\"false\""},
      {.key = kBatchSizeKey, .kind = K::kCount, .sizing = true, .help = "samples per batch, per process",
       .example = "\"32\""},
      {.key = kNumWorkersKey, .kind = K::kCount, .sizing = true, .allow_zero = true,
       .help = "DataLoader `num_workers`, per process (`0` allowed)", .example = "\"8\""},
      {.key = kSampleSizeKey, .kind = K::kQuantity, .sizing = true,
       .help = "bytes per sample after transforms and padding; bytes or a quantity", .example = "\"588Ki\""},
      {.key = kPrefetchKey, .kind = K::kCount, .sizing = true,
       .help = "DataLoader `prefetch_factor` (default from config, 2)", .example = "\"4\""},
      {.key = kProcsKey, .kind = K::kCount, .sizing = true,
       .help = "processes with their own DataLoader (default: what torchrun will start, see \"Where procs comes from\")",
       .example = "\"8\""},
      {.key = kSizeKey, .kind = K::kQuantity, .sizing = true, .help = "explicit sizeLimit; wins over the formula",
       .example = "\"16Gi\""},
      {.key = kInjectedSizeKey, .kind = K::kOutput, .help = "set by shmguard: the sizeLimit it gave /dev/shm",
       .example = "\"4481Mi\""},
      {.key = kSizingKey, .kind = K::kOutput, .help = "set by shmguard: the arithmetic behind that size",
       .example = "\"batch 64 x 588Ki = ...\""},
      // Rows only a test adds: tests/unit/annotation_row_test.cpp proves a row is all a new
      // annotation needs to be read, checked, recognised and listed.
      SHMGUARD_TEST_ANNOTATION_ROWS
  };
  return table;
}

const AnnotationSpec* find_annotation(std::string_view key) {
  for (const auto& row : annotation_table())
    if (row.key == key) return &row;
  return nullptr;
}

std::string annotation_help() {
  std::string out = "Pod annotations (on a workload's pod template):\n";
  for (const auto& row : annotation_table()) {
    if (row.kind == AnnotationKind::kOutput) continue;
    std::string key(row.key);
    out += "  " + key + std::string(key.size() < 30 ? 30 - key.size() : 1, ' ') + std::string(row.help) + "\n";
  }
  return out;
}

}  // namespace shmguard::inject
