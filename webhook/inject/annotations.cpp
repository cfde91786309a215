// The annotation table (see annotations.h).
#include "inject/annotations.h"

#ifndef SHMGUARD_TEST_ANNOTATION_ROWS
#define SHMGUARD_TEST_ANNOTATION_ROWS
#endif

namespace shmguard::inject {

const std::vector<AnnotationSpec>& annotation_table() {
  using K = AnnotationKind;
  static const std::vector<AnnotationSpec> table{
      {kInjectKey, K::kBool, false, false, "`\"true\"` forces injection, `\"false\"` opts out (label or annotation)", "\"false\""},
      {kBatchSizeKey, K::kCount, true, false, "samples per batch, per process", "\"32\""},
      {kNumWorkersKey, K::kCount, true, true, "DataLoader `num_workers`, per process (`0` allowed)", "\"8\""},
      {kSampleSizeKey, K::kQuantity, true, false,
       "bytes per sample after transforms and padding; bytes or a quantity", "\"588Ki\""},
      {kPrefetchKey, K::kCount, true, false, "DataLoader `prefetch_factor` (default from config, 2)", "\"4\""},
      {kProcsKey, K::kCount, true, false,
       "processes with their own DataLoader (default: what torchrun will start, see \"Where procs comes from\")",
       "\"8\""},
      {kSizeKey, K::kQuantity, true, false, "explicit sizeLimit; wins over the formula", "\"16Gi\""},
      {kInjectedSizeKey, K::kOutput, false, false, "set by shmguard: the sizeLimit it gave /dev/shm", "\"4481Mi\""},
      {kSizingKey, K::kOutput, false, false, "set by shmguard: the arithmetic behind that size",
       "\"batch 64 x 588Ki = ...\""},
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
