// Helpers shared by the YAML unit tests (yaml_read, yaml_convert, yaml_patch, yaml_emit).
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "manifests/yaml_doc.h"

namespace shmguard::manifests::test {

inline std::vector<RawDocument> split(const std::string& text) {
  std::istringstream in(text);
  DocumentReader r(in);
  std::vector<RawDocument> docs;
  RawDocument d;
  while (r.next(d)) docs.push_back(d);
  return docs;
}

// The document as the Kubernetes API would read it.
inline nlohmann::json load(const std::string& text) {
  YamlDocument doc;
  auto parsed = parse_document(text, doc);
  EXPECT_TRUE(parsed.ok()) << parsed.error();
  auto j = to_json(doc.root, 100000);
  EXPECT_TRUE(j.ok()) << j.error();
  return j ? *j : nlohmann::json();
}

// The document parsed and emitted again.
inline std::string emit(const std::string& text) {
  YamlDocument doc;
  auto parsed = parse_document(text, doc);
  EXPECT_TRUE(parsed.ok()) << parsed.error();
  auto s = emit_yaml(doc.root, 100000);
  EXPECT_TRUE(s.ok()) << s.error();
  return s ? *s : std::string();
}

}  // namespace shmguard::manifests::test
