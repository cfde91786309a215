// YAML documents for the offline path: split a stream into documents (keeping their exact text),
// convert between yaml-cpp nodes and JSON, apply a JSON patch to a node tree in place, and emit
// YAML/JSON that keeps key order and every value's type.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <istream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace shmguard::manifests {

// One document of a stream: its exact bytes (including a leading "---" line, if any).
struct RawDocument {
  std::string text;
  int first_line = 1;  // 1-based line of `text` in the source
};

// Reads documents one at a time from a stream, so memory follows the largest document.
class DocumentReader {
 public:
  explicit DocumentReader(std::istream& in) : in_(in) {}
  // False at end of input.
  bool next(RawDocument& out);

 private:
  std::istream& in_;
  std::string pending_;  // a separator line already read that starts the next document
  bool has_pending_ = false;
  int line_ = 0;
  bool done_ = false;
};

// An error with the line it happened on (1-based; 0 when unknown).
struct YamlError {
  std::string message;
  int line = 0;
};

// Parses one document. Returns std::nullopt and fills `err` on invalid YAML.
// A document with only comments or whitespace gives a Null node.
std::optional<YAML::Node> parse_document(const std::string& text, YamlError& err);

// Converts to JSON as the Kubernetes API would read it (plain scalars resolved to null, bool,
// int or float; quoted scalars stay strings). `budget` bounds the nodes visited, so alias
// bombs fail instead of expanding; std::nullopt and `err` when exceeded or unconvertible.
std::optional<nlohmann::json> to_json(const YAML::Node& node, std::size_t budget, YamlError& err);

// Applies RFC 6902 add/replace/remove operations to `root`, with `prefix` (a JSON pointer)
// prepended to each path. Returns false with `err` when a path does not resolve.
bool apply_patch(YAML::Node root, const std::string& prefix, const nlohmann::json& patch,
                 std::string& err);

// Emits YAML in kubectl's layout (2-space maps, "- " lists at the parent's indent). Strings that
// would read back as another type are quoted. `budget` bounds the nodes emitted.
std::optional<std::string> emit_yaml(const YAML::Node& node, std::size_t budget, YamlError& err);

// Emits pretty JSON with the node's key order. `indent` is the starting indent level.
std::optional<std::string> emit_json(const YAML::Node& node, std::size_t budget, int indent,
                                     YamlError& err);

// True when a string must be quoted to read back as a string in YAML 1.1 and 1.2.
bool needs_quotes(std::string_view s);

}  // namespace shmguard::manifests
