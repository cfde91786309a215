// Reading YAML: libyaml's events built into an order-preserving tree that keeps styles, byte
// spans, anchors and lines, and the tree's arena (a stream split into documents: yaml_split.cpp).
#include <yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>

#include "base/limits.h"
#include "manifests/conflict_marker.h"
#include "manifests/yaml_internal.h"

namespace shmguard::manifests {

using namespace internal;

namespace {

class Builder {
 public:
  Builder(YamlDocument& doc) : doc_(doc) {}

  Status run(const std::string& text) {
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) return Failure{"cannot initialise the YAML parser"};
    std::unique_ptr<yaml_parser_t, void (*)(yaml_parser_t*)> guard(&parser, yaml_parser_delete);
    yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()), text.size());
    int documents = 0;
    for (;;) {
      yaml_event_t ev;
      if (!yaml_parser_parse(&parser, &ev)) {
        std::string why = parser.problem ? parser.problem : "unreadable";
        if (parser.context) why = std::string(parser.context) + ": " + why;
        // The reader (bad UTF-8, a control character) gives a byte offset and no mark.
        const std::size_t end = std::min(parser.problem_offset, text.size());
        const int at = parser.error == YAML_READER_ERROR
                           ? static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(end), '\n'))
                           : static_cast<int>(parser.problem_mark.line);
        return Failure{"invalid YAML: " + why, at + 1, static_cast<int>(ParseFailure::kSyntax)};
      }
      std::unique_ptr<yaml_event_t, void (*)(yaml_event_t*)> ev_guard(&ev, yaml_event_delete);
      const int line = static_cast<int>(ev.start_mark.line) + 1;
      bool ok = true;
      switch (ev.type) {
        case YAML_STREAM_END_EVENT:
          return Ok{};
        case YAML_DOCUMENT_START_EVENT:
          if (++documents > 1) ok = fail("more than one document in a section (use a \"---\" line between documents)", line);
          break;
        case YAML_SCALAR_EVENT: ok = on_scalar(ev, line); break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT: ok = on_collection_start(ev, line); break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: on_collection_end(ev); break;
        case YAML_ALIAS_EVENT: ok = on_alias(ev, line); break;
        default: break;
      }
      if (!ok) return Failure{error_, error_line_, static_cast<int>(error_kind_)};
    }
  }

 private:
  // `limit`: valid YAML that a bound refuses (nesting, a recursive alias), not a syntax error.
  bool fail(std::string message, int line, bool limit = false) {
    error_ = limit ? std::move(message) : "invalid YAML: " + message;
    error_line_ = line;
    error_kind_ = limit ? ParseFailure::kBound : ParseFailure::kSyntax;
    return false;
  }
  std::string error_;
  int error_line_ = 0;
  ParseFailure error_kind_ = ParseFailure::kSyntax;

  bool on_scalar(const yaml_event_t& ev, int line) {
    YamlNode* n = doc_.make(YamlNode::Kind::kScalar);
    n->line = line;
    place(n, ev);
    n->value.assign(reinterpret_cast<const char*>(ev.data.scalar.value), ev.data.scalar.length);
    if (ev.data.scalar.tag) n->tag = reinterpret_cast<const char*>(ev.data.scalar.tag);
    switch (ev.data.scalar.style) {
      case YAML_SINGLE_QUOTED_SCALAR_STYLE: n->style = ScalarStyle::kSingle; break;
      case YAML_DOUBLE_QUOTED_SCALAR_STYLE: n->style = ScalarStyle::kDouble; break;
      case YAML_LITERAL_SCALAR_STYLE: n->style = ScalarStyle::kLiteral; break;
      case YAML_FOLDED_SCALAR_STYLE: n->style = ScalarStyle::kFolded; break;
      default: n->style = ScalarStyle::kPlain; break;
    }
    if (n->value.empty() && n->style == ScalarStyle::kPlain && !stack_.empty()) {
      // An implicit null ("key:" and nothing) takes the mark of whatever follows, which may be
      // lines away; it really sits right after its key.
      n->start = n->end = stack_.back().last_end;
      n->line = stack_.back().last_line;
    }
    n->height = 0;
    anchor(ev.data.scalar.anchor, n);
    if (!attach(n)) return false;
    note_end(n->end, n->line);
    return true;
  }

  bool on_collection_start(const yaml_event_t& ev, int line) {
    const bool seq = ev.type == YAML_SEQUENCE_START_EVENT;
    if (stack_.size() + 1 > kMaxNesting) return fail(kNestingError, line, true);
    YamlNode* n = doc_.make(seq ? YamlNode::Kind::kSequence : YamlNode::Kind::kMap);
    n->line = line;
    place(n, ev);
    n->flow = seq ? ev.data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE
                  : ev.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE;
    const yaml_char_t* tag = seq ? ev.data.sequence_start.tag : ev.data.mapping_start.tag;
    if (tag) n->tag = reinterpret_cast<const char*>(tag);
    anchor(seq ? ev.data.sequence_start.anchor : ev.data.mapping_start.anchor, n);
    if (!attach(n)) return false;
    stack_.push_back({n, nullptr, n->start, n->line, -1, 0});
    return true;
  }

  void on_collection_end(const yaml_event_t& ev) {
    YamlNode* n = stack_.back().node;
    n->end = n->flow ? ev.end_mark.index : stack_.back().last_end;
    const int end_line = n->flow ? static_cast<int>(ev.end_mark.line) + 1 : stack_.back().last_line;
    n->height = std::max(1, stack_.back().tallest + 1);
    stack_.pop_back();
    if (!stack_.empty()) stack_.back().tallest = std::max(stack_.back().tallest, n->height);
    note_end(n->end, end_line);
  }

  bool on_alias(const yaml_event_t& ev, int line) {
    auto it = anchors_.find(reinterpret_cast<const char*>(ev.data.alias.anchor));
    if (it == anchors_.end()) return fail("unknown alias", line);
    doc_.has_aliases = true;
    // An alias inside the node it names would expand without end; nesting counts expanded.
    if (it->second->height < 0) return fail("an alias inside the node it refers to (a recursive structure)", line, true);
    if (stack_.size() + static_cast<std::size_t>(it->second->height) > kMaxNesting)
      return fail(std::string(kNestingError) + " (alias expanded)", line, true);
    if (!attach(it->second)) return false;
    note_end(ev.end_mark.index, static_cast<int>(ev.end_mark.line) + 1);
    return true;
  }

  struct Frame {
    YamlNode* node;
    YamlNode* pending_key;
    std::size_t last_end;  // end of the last key, value or item read in this collection
    int last_line;
    int tallest;           // the greatest height among its items or values so far (-1: none)
    std::uint64_t key_bits = 0;  // a mapping's keys so far, as note_repeat marks them
  };

  static void place(YamlNode* n, const yaml_event_t& ev) {
    n->start = ev.start_mark.index;
    n->end = ev.end_mark.index;
    n->column = static_cast<int>(ev.start_mark.column);
  }

  void note_end(std::size_t end, int line) {
    if (stack_.empty()) return;
    stack_.back().last_end = end;
    stack_.back().last_line = line;
  }
  YamlDocument& doc_;
  std::vector<Frame> stack_;
  std::map<std::string, YamlNode*> anchors_;

  void anchor(const yaml_char_t* name, YamlNode* n) {
    if (!name) return;
    anchors_[reinterpret_cast<const char*>(name)] = n;
    n->anchored = true;
  }

  // A key of the mapping at `top` that an earlier one spells the same way is recorded. A bit per
  // (length, first byte) of the keys so far spares the comparisons for nearly every key.
  void note_repeat(Frame& top, const YamlNode* key) {
    const std::string& text = key->value;
    const std::uint64_t bit = 1ULL << ((text.size() * 7 + (text.empty() ? 0 : static_cast<unsigned char>(text[0]))) % 64);
    const bool maybe = (top.key_bits & bit) != 0;
    top.key_bits |= bit;
    if (!maybe) return;
    for (const auto& [k, v] : top.node->pairs)
      if (k->value == text) {
        doc_.repeated_keys.push_back({top.node, key, k});
        return;
      }
  }

  bool attach(YamlNode* n) {
    if (stack_.empty()) {
      doc_.root = n;
      return true;
    }
    Frame& top = stack_.back();
    if (top.node->kind == YamlNode::Kind::kSequence) {
      top.node->items.push_back(n);
    } else if (!top.pending_key) {
      if (n->kind != YamlNode::Kind::kScalar) return fail("mapping keys must be scalars", n->line);
      top.pending_key = n;
      note_repeat(top, n);
      return true;
    } else {
      top.node->pairs.emplace_back(top.pending_key, n);
      top.pending_key = nullptr;
    }
    top.tallest = std::max(top.tallest, n->height);  // a collection still open counts at its end
    return true;
  }
};

YamlNode* clone(YamlDocument& doc, const YamlNode* n, std::size_t& budget) {
  if (budget == 0) throw BudgetExceeded{};
  --budget;
  YamlNode* c = doc.make(n->kind);
  c->style = n->style;
  c->value = n->value;
  c->tag = n->tag;
  c->line = n->line;
  c->start = n->start;
  c->end = n->end;
  c->column = n->column;
  c->flow = n->flow;
  for (const auto* item : n->items) c->items.push_back(clone(doc, item, budget));
  for (const auto& [k, v] : n->pairs) c->pairs.emplace_back(clone(doc, k, budget), clone(doc, v, budget));
  return c;
}
}  // namespace

bool YamlDocument::unshare(std::size_t budget) {
  if (!has_aliases || !root) return true;
  try {
    root = clone(*this, root, budget);  // the old nodes stay in the arena, unreferenced
    has_aliases = false;
    return true;
  } catch (const BudgetExceeded&) {
    return false;
  }
}

YamlNode* YamlDocument::make(YamlNode::Kind kind) {
  if (used == blocks.size() * kBlock) blocks.push_back(std::make_unique<YamlNode[]>(kBlock));
  YamlNode& n = blocks[used / kBlock][used % kBlock];
  ++used;
  n.reset(kind);
  return &n;
}

void YamlNode::reset(Kind k) {
  kind = k;
  style = ScalarStyle::kPlain;
  value.clear();
  tag.clear();
  items.clear();
  pairs.clear();
  line = 0;
  start = end = 0;
  column = 0;
  flow = anchored = false;
  height = -1;
}

void YamlDocument::clear() {
  used = 0;
  root = nullptr;
  has_aliases = false;
  repeated_keys.clear();
}

Status parse_document(const std::string& text, YamlDocument& doc) {
  doc.clear();
  // Before libyaml, which would fail a line or more later saying something else (or read it as text).
  if (auto marker = find_conflict_marker(text))
    return Failure{conflict_marker_message(*marker), marker->line, static_cast<int>(ParseFailure::kConflictMarker)};
  Builder b(doc);
  if (auto built = b.run(text); !built) return built;
  if (doc.root && doc.root->is_null()) doc.root = nullptr;
  return Ok{};
}

TextIndex::TextIndex(const std::string& text) : size_(text.size()) {
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) bom_ = 3;  // libyaml skips a BOM without counting it
  // Eight bytes at a time: a manifest is mostly ASCII, and this runs on every document edited.
  bool high = false;
  std::size_t at = 0;
  for (; at + 8 <= text.size() && !high; at += 8) {
    std::uint64_t word;
    std::memcpy(&word, text.data() + at, 8);
    high = (word & 0x8080808080808080ULL) != 0;
  }
  for (; at < text.size() && !high; ++at) high = static_cast<unsigned char>(text[at]) >= 0x80;
  ascii_ = !high;
  if (ascii_) return;
  for (std::size_t i = bom_; i < text.size(); ++i)
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) starts_.push_back(i);
}

std::size_t TextIndex::byte(std::size_t index) const {
  if (ascii_) return std::min(index + bom_, size_);
  return index < starts_.size() ? starts_[index] : size_;
}

std::optional<std::string> strip_trailing_block_scalar(const YamlDocument& doc, const std::string& text) {
  const YamlNode* n = doc.root;
  for (std::size_t depth = 0; n && depth < 10000; ++depth) {
    if (n->kind == YamlNode::Kind::kMap && !n->pairs.empty()) {
      n = n->pairs.back().second;
    } else if (n->kind == YamlNode::Kind::kSequence && !n->items.empty()) {
      n = n->items.back();
    } else {
      break;
    }
  }
  if (!n || n->kind != YamlNode::Kind::kScalar) return std::nullopt;
  if (n->style != ScalarStyle::kLiteral && n->style != ScalarStyle::kFolded) return std::nullopt;
  const std::size_t from = TextIndex(text).byte(n->start) + 1;
  if (from > text.size() || (text[from - 1] != '|' && text[from - 1] != '>')) return std::nullopt;
  std::size_t to = from;
  std::string digits;
  bool strip = false;
  for (; to < text.size() && (std::isdigit(static_cast<unsigned char>(text[to])) || text[to] == '+' || text[to] == '-'); ++to) {
    if (text[to] == '-') strip = true;
    if (std::isdigit(static_cast<unsigned char>(text[to]))) digits += text[to];
  }
  if (strip) return std::nullopt;
  return text.substr(0, from) + digits + "-" + text.substr(to);
}

}  // namespace shmguard::manifests
