// Surgical edits: writes the edit plan (edit_plan.h) into a document's own text instead of
// re-emitting it, so every comment, blank line, quote style, flow collection and anchor that the
// plan does not touch keeps its bytes. Insertion points come from libyaml's marks (YamlNode
// start/end); new lines follow the document's indentation, sequence style and line endings, and
// JSON documents get JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "manifests/edit_plan.h"
#include "manifests/yaml_doc.h"

namespace shmguard::manifests {

// Lines the splicer inserted after the last line of a block collection: `size` bytes at byte `at`
// of the old text and `out_at` of the new, holding `entries` appended to `node`.
struct Insertion {
  const YamlNode* node = nullptr;
  std::vector<const PlannedEdit*> entries;
  std::size_t at = 0, out_at = 0, size = 0;
};

struct EditedText {
  std::string text;
  std::vector<Insertion> insertions;  // in text order
  // Every change is one of `insertions`: no replaced value, no flow collection rewritten, no line
  // break added at the end of the text.
  bool only_insertions = true;
};

// Writes `plan` (made by plan_edits from `doc`, which is `text` parsed by parse_document) into the
// text. An edit shared through an anchor is written once, at the anchor. The caller verifies the
// result by reading it back (read_back.h). Fails with kUnsupportedLayout for a layout the splicer
// does not write.
Result<EditedText> edit_in_place(const std::string& text, const YamlDocument& doc, const EditPlan& plan);

}  // namespace shmguard::manifests
