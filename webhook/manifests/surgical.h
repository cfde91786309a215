// Surgical edits: applies the engine's JSON patches to a document's own text instead of
// re-emitting it, so every comment, blank line, quote style, flow collection and anchor that the
// patch does not touch keeps its bytes. Insertion points come from libyaml's marks (YamlNode
// start/end); new lines follow the document's indentation, sequence style and line endings, and
// JSON documents get JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "manifests/yaml_doc.h"

namespace shmguard::manifests {

// One template's patch: the template's JSON pointer in the document and its RFC 6902 operations.
struct TemplatePatch {
  std::string pointer;
  const nlohmann::json* ops;
};

// `doc` must be `text` parsed by parse_document. Supports what inject_pod emits: "add" to the end
// of a mapping or sequence, and "add"/"replace" of an existing value. Templates that reach one
// node through an anchor (aliases) and ask for the same edit there get it once. The caller
// verifies the result by parsing it.
// Why a document could not be edited in place (Result::kind<EditFailure>()).
enum class EditFailure {
  kUnsupportedLayout = 0,  // a layout the editor does not write (an anchored value, a replaced block
                           // scalar): the re-emitter can still write the document
  kAnchorConflict = 1,     // templates sharing the anchored node at line() (in the document) need
                           // different edits: no writer can keep both
};

// The edited text, or why it could not be edited in place.
Result<std::string> edit_in_place(const std::string& text, const YamlDocument& doc,
                                  const std::vector<TemplatePatch>& patches);

}  // namespace shmguard::manifests
