// YAML documents for the offline path (manifests; the config file is read by yaml-cpp). One API
// over six units, each with its own tests:
//   yaml_split.cpp    a stream split into documents (their exact text: DocumentReader)
//   yaml_read.cpp     libyaml's events built into an order-preserving node tree that remembers
//                     every scalar's style and span
//   yaml_convert.cpp  the tree as JSON, the way the Kubernetes API reads YAML; JSON into the tree
//   yaml_patch.cpp    JSON pointers into the tree (edit_plan.h plans and applies patches with them)
//   yaml_emit.cpp     YAML/JSON written out keeping key order and every value's type
//   yaml_quote.cpp    the quoting rules of new strings (needs_quotes, yaml_string)
#pragma once

#include <cstddef>
#include <istream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

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
  // One line of the input without its '\n' (valid until the next call); false at the end.
  // `newline`: the line ended with one.
  bool read_line(std::string_view& line, bool& newline);
  // Past the whole lines in buf_ that cannot end a document whose content has begun (no directives
  // open): only a line starting "---" or "..." can. Stops at a line starting '-' or '.', or at one
  // not whole in buf_ yet; counts the lines passed.
  void skip_plain_lines();

  std::istream& in_;
  std::string buf_;      // input read ahead in chunks; lines are cut from it
  std::size_t pos_ = 0;  // where the next line starts in buf_
  // The document being read: its lines are the bytes of buf_ from sink_from_ on, copied into
  // *sink_ as one run when it ends (or before read_line drops them from buf_).
  std::string* sink_ = nullptr;
  std::size_t sink_from_ = 0;
  bool eof_ = false;
  std::string pending_;  // a separator line already read that starts the next document
  bool has_pending_ = false;
  int line_ = 0;
  bool done_ = false;
};

enum class ScalarStyle { kPlain, kSingle, kDouble, kLiteral, kFolded, kNew };

struct YamlNode {
  enum class Kind { kScalar, kSequence, kMap };
  Kind kind = Kind::kScalar;
  ScalarStyle style = ScalarStyle::kPlain;  // scalars; kNew: created by a patch
  std::string value;                        // scalar text
  std::string tag;                          // explicit tag as libyaml reports it, or empty
  std::vector<YamlNode*> items;             // sequence
  std::vector<std::pair<YamlNode*, YamlNode*>> pairs;  // mapping, in document order
  int line = 0;                             // 1-based, relative to the document text
  // Where the node is in the document text, as libyaml counts (characters, not bytes; see
  // TextIndex): `start` is its first character, `end` is just past its last one (for a block
  // collection: past its last child, so trailing comments and blank lines stay outside).
  std::size_t start = 0, end = 0;
  int column = 0;                           // 0-based column of `start`
  bool flow = false;                        // a [..] or {..} collection
  bool anchored = false;                    // carries an anchor: aliases may share it
  // Collections nested in this node, aliases expanded (a scalar 0, "[[]]" 2); -1 while the
  // parser is still inside it. Parsing bounds it, so walks over the tree recurse a bounded depth.
  int height = -1;

  bool is_null() const;
  // Back to a fresh node of `kind`, keeping its strings' and vectors' capacity (the arena's reuse):
  // every field above is set here.
  void reset(Kind k);
};

// Owns the nodes of one document. Aliases point at the anchored node, so a tree may share
// nodes; walkers bound their work with a budget instead of trusting the size of the text.
// The nodes are an arena kept across parses: parse_document reuses them (their strings and
// vectors keep their capacity), so a stream of documents allocates about as much as its largest.
struct YamlDocument {
  // Blocks of kBlock nodes: a node never moves, and finding the next one is a shift and a mask
  // (a std::deque of nodes this size holds three per chunk).
  static constexpr std::size_t kBlock = 256;
  std::vector<std::unique_ptr<YamlNode[]>> blocks;
  std::size_t used = 0;      // the first `used` nodes of the blocks belong to the current document
  YamlNode* root = nullptr;  // null for an empty or comment-only document
  bool has_aliases = false;  // some nodes are shared
  // Keys written twice in one mapping, in the order parse_document read them: the mapping, the
  // repeat, and the first key it repeats (JSON and kubectl keep the repeat's value).
  struct RepeatedKey {
    const YamlNode* map;
    const YamlNode* key;
    const YamlNode* first;
  };
  std::vector<RepeatedKey> repeated_keys;
  YamlNode* make(YamlNode::Kind kind);
  void clear();              // forgets the document; keeps the arena
  // Gives every alias its own copy, so a patch to one place cannot change another.
  // False when the expansion would exceed `budget` nodes.
  bool unshare(std::size_t budget);
};

// libyaml's marks count characters; edits of the text need bytes. ASCII text (nearly every
// manifest) maps one to one; otherwise a table of character starts is built once.
class TextIndex {
 public:
  explicit TextIndex(const std::string& text);
  std::size_t byte(std::size_t index) const;

 private:
  std::size_t size_;
  std::size_t bom_ = 0;
  bool ascii_ = true;
  std::vector<std::size_t> starts_;
};

// For a document (`doc` parsed from `text`) whose text has no final line break and whose last
// scalar is a block scalar ("|", ">") that keeps its final line break: the text with that
// scalar's chomping set to strip ("|-"), so that a line break added after the text (to start the
// next file's documents) does not become part of its value. std::nullopt when nothing needs it.
std::optional<std::string> strip_trailing_block_scalar(const YamlDocument& doc, const std::string& text);

// ---- yaml_patch.cpp ----

// The reference tokens of a JSON pointer, unescaped ("~1" -> "/", "~0" -> "~").
std::vector<std::string> pointer_tokens(const std::string& pointer);

// The index a pointer token names in a sequence of `size` items, or std::nullopt.
std::optional<std::size_t> item_index(const std::string& token, std::size_t size);

// The node at a JSON pointer (mapping keys and sequence indexes), or null. `anchor` is set to the
// first anchored node the walk passes through (whose text other places may share), else null.
const YamlNode* resolve(const YamlNode* root, const std::string& pointer, const YamlNode** anchor = nullptr);

// ---- yaml_read.cpp (YamlDocument, TextIndex, strip_trailing_block_scalar) and yaml_split.cpp (DocumentReader) ----

// Why a document did not parse (Result::kind<ParseFailure>()).
enum class ParseFailure {
  kSyntax = 0,  // not YAML (the message starts "invalid YAML: ")
  kBound = 1,   // valid YAML that a bound refuses: nesting, a recursive alias
  kConflictMarker = 2,  // a merge-conflict marker line (conflict_marker.h); the message says so
};

// Parses one document. A failure has the line (1-based within the document) where there is one.
Status parse_document(const std::string& text, YamlDocument& doc);

// The nodes a walk over the tree of `text` may visit: alias bombs and oversized documents fail
// instead of expanding without bound, while any document without aliases fits many times over.
inline std::size_t node_budget(std::string_view text) { return text.size() * 16 + 4096; }

// ---- yaml_convert.cpp ----

// An object's members in the order Kubernetes writes them: "name" first, the rest as they come
// (new mappings, in the tree or spliced into text, read like the API server's own output); without
// `name_first`, all as they come. The keys are views into `o`.
std::vector<std::pair<std::string_view, const nlohmann::json*>> kube_members(const nlohmann::json& o, bool name_first = true);

// Converts to JSON as the Kubernetes API would read it (plain scalars resolved to null, bool,
// int or float; quoted scalars stay strings). `budget` bounds the nodes visited, so alias
// bombs fail instead of expanding; a failure when exceeded or unconvertible (with the line).
Result<nlohmann::json> to_json(const YamlNode* node, std::size_t budget);

// True when `node` reads as exactly `expected` (as to_json would convert it), without building
// the JSON. False too when the walk exceeds `budget` nodes.
bool equals_json(const YamlNode* node, const nlohmann::json& expected, std::size_t budget);

// ---- yaml_emit.cpp ----

// Emits YAML in kubectl's layout (2-space maps, "- " lists at the parent's indent). Scalars keep
// their quoting style; new strings that would read back as another type are quoted.
Result<std::string> emit_yaml(const YamlNode* node, std::size_t budget);

// How block YAML is laid out: kubectl's by default; the splicer passes the one it read off the
// document it edits.
struct BlockLayout {
  int step = 2;         // a nested mapping's keys, relative to its key
  int seq_indent = 0;   // a sequence's "-", relative to its key
  int item_indent = 2;  // a mapping item's keys, relative to its "-"
};

// How a new value is written: the one choice every writer of new content makes (the splicer, fn's
// results, observe's snippet).
struct RenderStyle {
  enum class Form {
    kBlock,       // YAML lines: a collection's members or "-" items at `indent` (a scalar: its one-line text)
    kFlow,        // YAML on one line: {name: x, emptyDir: {medium: Memory}}
    kJson,        // JSON on one line: {"name": "x", "emptyDir": {"medium": "Memory"}}
    kJsonPretty,  // JSON over lines, `layout.step` columns a level; the first line continues the
                  // current one, the others start at `indent` or deeper
  };
  Form form = Form::kBlock;
  BlockLayout layout{};        // kBlock; kJsonPretty reads its step
  int indent = 0;              // kBlock: the column of the members or dashes; kJsonPretty: of the closing bracket
  bool inline_first = false;   // kBlock: the first line without its indent (the caller wrote it, or a "- ")
  bool name_first = true;      // members in Kubernetes' order ("name" first), else in the object's own
  std::string_view eol = "\n";  // the line ending of the text it goes into
  // kBlock: `value` as one entry of a collection: an item ("- " and the value), or the member
  // `key` with the value; the same text as rendering [value] or {key: value}, without building it.
  enum class Entry { kNone, kItem, kMember };
  Entry entry = Entry::kNone;
  std::string_view key{};  // Entry::kMember
};

// `value` written in `style` by the emitter that writes whole documents. A JSON value is a tree (no
// aliases), so no node budget applies. kBlock fails for an empty collection (the caller writes "{}"
// or "[]" inline).
Result<std::string> render(const nlohmann::json& value, const RenderStyle& style);

// Emits pretty JSON (two spaces a level) with the document's key order.
Result<std::string> emit_json(const YamlNode* node, std::size_t budget);

// ---- yaml_quote.cpp ----

// True when a string must be quoted to read back as a string in YAML 1.1 and 1.2.
bool needs_quotes(std::string_view s);

// A string as a YAML scalar that reads back as that string: plain when safe, else double-quoted.
// `in_flow`: inside [..] or {..}, where ",[]{}" also need quotes.
std::string yaml_string(std::string_view s, bool in_flow);

}  // namespace shmguard::manifests
