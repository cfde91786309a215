// The annotation table, and a pod's values read by it (see annotations.h).
#include "inject/annotations.h"

#include "base/assert.h"
#include "base/json_fields.h"
#include "base/text.h"
#include "sizing/quantity.h"

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

std::optional<std::uint64_t> AnnotationValues::operator[](std::string_view key) const {
  SHMGUARD_ASSERT(find_annotation(key));  // the formula asks only for keys of the table
  for (const auto& [k, v] : read)
    if (k == key) return v;
  return std::nullopt;
}

namespace {

using nlohmann::json;

// Reading the values: each bad one is warned about and listed as ignored.
struct AnnotationReader {
  const json* ann;
  Warnings& w;
  std::vector<std::string>& ignored;

  void bad(std::string_view key, const std::string& raw, const std::string& why) {
    w.warn(std::string(key) + " \"" + printable(raw) + "\" " + why + "; ignored", key);
    const std::string short_why = why.starts_with("is ") ? why.substr(3) : why;
    ignored.push_back(std::string(key.substr(key.find('/') + 1)) + " \"" + printable(raw) + "\" (" + short_why + ")");
  }

  // The text of annotation `key`; nullopt when absent, or not a scalar (warned).
  std::optional<std::string> text(std::string_view key) {
    auto v = ann ? value_text(*ann, key) : std::nullopt;
    if (!v && ann && ann->contains(key)) bad(key, "(not a string)", "is not a string");
    return v;
  }

  // A count annotation (its row says whether 0 is allowed). Values past 2^62 saturate (the formula
  // then clamps to max).
  std::optional<std::uint64_t> count(const AnnotationSpec& row, const std::string& raw) {
    auto v = sizing::parse_count(raw);
    if (!v) {
      bad(row.key, raw, "is not a whole number");
      return std::nullopt;
    }
    if (*v == 0 && !row.allow_zero) {
      bad(row.key, raw, "must be at least 1");
      return std::nullopt;
    }
    return v;
  }

  std::optional<std::uint64_t> quantity(const AnnotationSpec& row, const std::string& raw) {
    // Absurd sizes saturate: the formula then clamps to max, with its own warning.
    auto q = sizing::parse_size(raw, {.zero_ok = false, .saturate_ok = true});
    if (!q) {
      bad(row.key, raw, q.error());
      return std::nullopt;
    }
    return *q;
  }
};

}  // namespace

// A row added to the table is read, checked and warned about here.
AnnotationValues read_annotation_values(const json* annotations, Warnings& w, std::vector<std::string>& ignored) {
  AnnotationReader reader{annotations, w, ignored};
  AnnotationValues values;
  for (const auto& row : annotation_table()) {
    if (row.kind != AnnotationKind::kCount && row.kind != AnnotationKind::kQuantity) continue;
    auto raw = reader.text(row.key);
    if (!raw) continue;
    auto v = row.kind == AnnotationKind::kCount ? reader.count(row, *raw) : reader.quantity(row, *raw);
    if (v) values.read.emplace_back(row.key, *v);
  }
  return values;
}

const json* effective_annotations(const json& pod, const json* inherited, json& merged) {
  const json* meta = object_at(pod, "metadata");
  const json* own = meta ? object_at(*meta, "annotations") : nullptr;
  if (!inherited || !inherited->is_object() || inherited->empty()) return own;
  merged = json::object();
  for (const auto& [k, v] : inherited->items())
    if (k.starts_with(kAnnotationPrefix)) merged[k] = v;
  if (own)
    for (const auto& [k, v] : own->items()) merged[k] = v;
  return &merged;
}

}  // namespace shmguard::inject
