// Internals shared by the YAML units (yaml_read, yaml_split, yaml_convert, yaml_emit, yaml_quote,
// yaml_patch): the scalar typing rules of Kubernetes' YAML reader, the tree-walk failures and their
// guard, the quoted forms of a string. Not part of the manifests API (yaml_doc.h is).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "manifests/yaml_doc.h"

namespace shmguard::manifests::internal {

// A tree walk ran out of its node budget (alias expansion).
struct BudgetExceeded {};
// A tree that JSON cannot hold (a mapping key that is not a scalar), with its line.
struct Unconvertible {
  std::string why;
  int line;
};

// Runs a tree walk, turning its budget and shape failures into a failure (with the line).
template <typename Walk>
auto guarded(Walk&& walk) -> Result<decltype(walk())> {
  try {
    return walk();
  } catch (const BudgetExceeded&) {
    return Failure{"document expands to too many nodes (alias expansion?)"};
  } catch (const Unconvertible& u) {
    return Failure{u.why, u.line};
  }
}

// Scalar typing (yaml_convert.cpp), YAML 1.1 as Kubernetes reads it.
bool all_digits(std::string_view s, std::size_t from = 0);
bool is_float_text(std::string_view s);
bool is_special_float(std::string_view s);
bool is_null_word(std::string_view s);
// The value of a YAML 1.1 bool word (yes, on, True, n, OFF...); std::nullopt for any other text.
std::optional<bool> bool_word(std::string_view s);
// True when a plain scalar is a string whatever follows its first character: a letter (no number
// starts with one) that starts no null or bool word, or any letter in a text longer than those
// words (five letters at most).
bool plain_word(std::string_view s);
nlohmann::json resolve_plain(const std::string& s);
// True when a scalar with this tag is typed by its text (no tag, or a yaml.org tag but !!str).
bool plain_tag(const std::string& tag);
nlohmann::json scalar_json(const YamlNode& n);
// A mapping key's text; throws Unconvertible for a non-scalar key.
const std::string& key_text(const YamlNode* k);
// New nodes in `doc` for `j`: "name" first in mappings, as Kubernetes writes it (`name_first`),
// else the members in the object's own order.
YamlNode* from_json(YamlDocument& doc, const nlohmann::json& j, bool name_first = true);

// The quoted forms of a string (yaml_quote.cpp): "..." with escapes, '...' with '' for a quote;
// literal_ok: text a literal block (|) holds exactly (several lines, no control characters, no
// leading space).
std::string double_quoted(std::string_view s);
std::string single_quoted(std::string_view s);
bool literal_ok(std::string_view s);

}  // namespace shmguard::manifests::internal
