// Surgical edits: writes the edit plan (edit_plan.h) into a document's own text instead of
// re-emitting it, so every comment, blank line, quote style, flow collection and anchor that the
// plan does not touch keeps its bytes. Insertion points come from libyaml's marks (YamlNode
// start/end); new lines follow the document's indentation, sequence style and line endings, and
// JSON documents get JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"
#include "manifests/edit_plan.h"
#include "manifests/yaml_doc.h"

namespace shmguard::manifests {

// Writes `plan` (made by plan_edits from `doc`, which is `text` parsed by parse_document) into the
// text. An edit shared through an anchor is written once, at the anchor. The caller verifies the
// result by reading it back (matches_plan). Fails with kUnsupportedLayout for a layout the splicer
// does not write.
Result<std::string> edit_in_place(const std::string& text, const YamlDocument& doc, const EditPlan& plan);

}  // namespace shmguard::manifests
