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
  YamlError err;
  YamlDocument doc;
  EXPECT_TRUE(parse_document(text, doc, err)) << err.message;
  auto j = to_json(doc.root, 100000, err);
  EXPECT_TRUE(j) << err.message;
  return j ? *j : nlohmann::json();
}

// The document parsed and emitted again.
inline std::string emit(const std::string& text) {
  YamlError err;
  YamlDocument doc;
  EXPECT_TRUE(parse_document(text, doc, err)) << err.message;
  auto s = emit_yaml(doc.root, 100000, err);
  EXPECT_TRUE(s) << err.message;
  return s ? *s : std::string();
}

}  // namespace shmguard::manifests::test
