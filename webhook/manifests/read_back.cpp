// The read-back of an edit from its inserted lines (see read_back.h for why it holds).
#include "manifests/read_back.h"

#include <string_view>

#include "manifests/edit_plan.h"

namespace shmguard::manifests {
namespace {

bool block_scalar(const YamlNode* n) {
  return n->kind == YamlNode::Kind::kScalar && (n->style == ScalarStyle::kLiteral || n->style == ScalarStyle::kFolded);
}

// The node a collection's text ends in: its last value, that value's last value, and so on down to
// a scalar or an empty collection. A tree without aliases ends within `nodes` steps.
const YamlNode* last_leaf(const YamlNode* n, std::size_t nodes) {
  for (std::size_t step = 0; step <= nodes; ++step) {
    if (n->kind == YamlNode::Kind::kMap && !n->pairs.empty()) n = n->pairs.back().second;
    else if (n->kind == YamlNode::Kind::kSequence && !n->items.empty()) n = n->items.back();
    else return n;
  }
  return nullptr;
}

bool has_entries(const YamlNode* n) {
  if (n->kind == YamlNode::Kind::kMap) return !n->pairs.empty();
  return n->kind == YamlNode::Kind::kSequence && !n->items.empty();
}

// The column of a block collection's entries: a mapping's keys, a sequence's "-" (where the
// splicer starts the lines it appends).
int entry_column(const YamlNode* n) {
  return n->kind == YamlNode::Kind::kMap ? n->pairs.front().first->column : n->column;
}

// Spaces at the start of the line at `pos`; -1 when a tab comes before its first character.
int indent_at(std::string_view text, std::size_t pos) {
  int n = 0;
  while (pos + n < text.size() && text[pos + n] == ' ') ++n;
  return pos + n < text.size() && text[pos + n] == '\t' ? -1 : n;
}

// The start of the first line at or after `pos` that is neither blank nor a comment; npos if none.
std::size_t next_content_line(std::string_view text, std::size_t pos) {
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::size_t first = text.find_first_not_of(" \t\r", pos);
    if (first < eol && text[first] != '#') return pos;
    pos = eol + 1;
  }
  return std::string_view::npos;
}

bool dash_entry(std::string_view text, std::size_t at) {
  return at < text.size() && text[at] == '-' &&
         (at + 1 == text.size() || text[at + 1] == ' ' || text[at + 1] == '\n' || text[at + 1] == '\r');
}

// Every line of `run` is blank or at least `column` spaces in, and the first one starts an entry
// exactly there.
bool lines_at_or_right_of(std::string_view run, int column) {
  if (indent_at(run, 0) != column || run.size() <= static_cast<std::size_t>(column)) return false;
  std::size_t pos = 0;
  while (pos < run.size()) {
    std::size_t eol = run.find('\n', pos);
    if (eol == std::string_view::npos) eol = run.size();
    const int indent = indent_at(run, pos);
    const std::size_t first = run.find_first_not_of(" \r", pos);
    if (indent < 0 || (first < eol && indent < column)) return false;
    pos = eol + 1;
  }
  return true;
}

// The run of inserted lines, parsed alone, is exactly the entries planned for its collection, and
// does not end in a block scalar.
bool run_matches(std::string_view run, const Insertion& ins, int column, YamlDocument& scratch) {
  for (const PlannedEdit* e : ins.entries)
    if (e->op != EditOp::kAppend || e->parent != ins.node || e->shared || e->anchor) return false;
  if (!lines_at_or_right_of(run, column)) return false;
  const std::string text(run);
  if (!parse_document(text, scratch).ok() || !scratch.root || scratch.has_aliases) return false;
  const YamlNode* root = scratch.root;
  if (root->flow || root->kind != ins.node->kind || root->kind == YamlNode::Kind::kScalar) return false;
  if (!appends_match(root, 0, ins.entries, node_budget(text))) return false;
  if (entry_column(root) != column) return false;
  const YamlNode* leaf = last_leaf(root, scratch.used);
  return leaf && !block_scalar(leaf);
}

// What follows a run in the old text closes its collection as it did before: no content line, or
// one left of the entries' column (for a sequence: also a key at that column).
bool closed_as_before(std::string_view old_text, const Insertion& ins, int column) {
  const std::size_t next = next_content_line(old_text, ins.at);
  if (next == std::string_view::npos) return true;
  const int indent = indent_at(old_text, next);
  if (indent < 0) return false;
  if (indent < column) return true;
  return indent == column && ins.node->kind == YamlNode::Kind::kSequence && !dash_entry(old_text, next + indent);
}

}  // namespace

bool reads_back_from_insertions(const std::string& old_text, const YamlDocument& doc, const EditedText& edited,
                                YamlDocument& scratch) {
  if (!edited.only_insertions || edited.insertions.empty() || !doc.root || doc.has_aliases || doc.root->flow)
    return false;
  if (old_text.empty() || old_text.back() != '\n' || old_text.front() == '%') return false;
  const std::string_view out = edited.text;
  std::size_t old_pos = 0, new_pos = 0;  // where the bytes copied from the old text resume
  const auto& runs = edited.insertions;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Insertion& ins = runs[i];
    const YamlNode* n = ins.node;
    if (ins.at < old_pos || n->flow || n->anchored) return false;
    const std::size_t same = ins.at - old_pos;
    if (ins.out_at != new_pos + same || out.compare(new_pos, same, old_text, old_pos, same) != 0) return false;
    old_pos = ins.at;
    new_pos = ins.out_at + ins.size;
    if (!has_entries(n)) return false;
    const int column = entry_column(n);
    const YamlNode* leaf = last_leaf(n, doc.used);
    if (!leaf || block_scalar(leaf)) return false;
    if (!run_matches(out.substr(ins.out_at, ins.size), ins, column, scratch)) return false;
    if (i + 1 < runs.size() && runs[i + 1].at == ins.at) {
      // The next run appends to a collection that encloses this one, left of it: its first line
      // closes this run as the old next line did.
      const YamlNode* outer = runs[i + 1].node;
      if (!has_entries(outer) || entry_column(outer) >= column || outer->start > n->start || n->end > outer->end) return false;
      continue;
    }
    if (!closed_as_before(old_text, ins, column)) return false;
  }
  const std::size_t rest = old_text.size() - old_pos;
  return out.size() == new_pos + rest && out.compare(new_pos, rest, old_text, old_pos, rest) == 0;
}

}  // namespace shmguard::manifests
