// The engine's JSON patches resolved against one document's tree, once, into an edit plan: which
// collection each edit changes, how, and with what value. Three consumers, one plan:
//   surgical.cpp   writes the plan into the document's own text (edit_in_place)
//   apply_plan     writes it into the tree, for the re-emitter
//   matches_plan   checks that an edited text's tree is the original tree with the plan applied
// The plan holds what inject_pod emits: "add" at the end of a mapping or sequence, and "add" or
// "replace" of an existing mapping value or sequence item. Anything else is refused by the planner.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "manifests/yaml_doc.h"

namespace shmguard::manifests {

// One template's patch: the template's JSON pointer in the document and its RFC 6902 operations.
struct TemplatePatch {
  std::string pointer;
  const nlohmann::json* ops;
};

// Why a document could not be edited in place (Result::kind<EditFailure>()).
enum class EditFailure {
  kUnsupportedLayout = 0,  // a layout the splicer does not write (an anchored value, a replaced block
                           // scalar), or an operation the plan does not hold: the re-emitter may still
                           // write the document
  kAnchorConflict = 1,     // templates sharing the anchored node at line() (in the document) need
                           // different edits: no writer can keep both
};

enum class EditOp {
  kAppend,   // a new entry at the end of `parent` (a new key of a mapping, or a sequence item)
  kReplace,  // `old`, the value of `key` in a mapping or an item of a sequence, becomes `value`
};

struct PlannedEdit {
  EditOp op = EditOp::kAppend;
  const YamlNode* parent = nullptr;  // the mapping or sequence that changes
  std::string key;                   // a mapping's key (new or replaced); empty in a sequence
  const YamlNode* key_node = nullptr;  // kReplace in a mapping: the key's node
  const YamlNode* old = nullptr;       // kReplace: the node replaced
  nlohmann::json value;
  std::string path;                  // the edit's JSON pointer in the document (for messages and the read-back)
  const YamlNode* anchor = nullptr;  // the first anchored node on the way down: other places may share the edit
  // Another path (of another template, or another place in this one) reaches the same node
  // through an anchor and asked for this very edit first: the text gets it once, the read-back
  // expects it at both paths.
  bool shared = false;
};

struct EditPlan {
  std::vector<PlannedEdit> edits;  // in patch order
};

// Resolves every template's patch against `doc`. Fails (EditFailure) on a path that does not
// resolve or an operation outside the plan's set, and with kAnchorConflict (and the anchor's line)
// when templates sharing an anchored node ask for different edits under it.
Result<EditPlan> plan_edits(const YamlDocument& doc, const std::vector<TemplatePatch>& patches);

// Applies the plan to the tree it was made from (`doc`, whose nodes the plan points at). New
// nodes are written in the style of new strings; a mapping keeps its key order. Unshare the tree
// before planning: an edit shared through an anchor would otherwise reach every alias.
void apply_plan(YamlDocument& doc, const EditPlan& plan);

// True when the entries of `collection` from index `from` on are exactly `appends`, in plan order:
// a mapping's scalar keys and values, a sequence's items, each value read as the plan's (walking at
// most `budget` nodes each). What the whole read-back checks after a collection's old entries, and
// the local one (read_back.h) over a run of inserted lines parsed alone.
bool appends_match(const YamlNode* collection, std::size_t from, const std::vector<const PlannedEdit*>& appends,
                   std::size_t budget);

// True when `after` (an edited text read back) is `before` (the tree the plan was made from) with
// the plan applied, and nothing else changed: at every edit's path, the new value reads as the
// plan's value; everywhere else, the same nodes. Walks at most `budget` nodes.
bool matches_plan(const YamlNode* before, const YamlNode* after, const EditPlan& plan, std::size_t budget);

}  // namespace shmguard::manifests
