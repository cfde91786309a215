// Surgical edits of a document's text (see surgical.h).
#include "manifests/surgical.h"

#include <algorithm>
#include <cstddef>
#include <map>

namespace shmguard::manifests {
namespace {

using nlohmann::json;

struct Unsupported {
  std::string why;
};

// How the document writes block collections, read off the document itself.
struct Style {
  BlockLayout block{.step = 2, .seq_indent = -1, .item_indent = 2};  // seq_indent -1: not seen yet
  bool json = false;   // the document is JSON: insert JSON
  bool pretty = false; // ... pretty-printed over several lines (else inserted JSON stays on one line)
  std::string eol = "\n";
};

Style detect_style(const std::string& text, const YamlNode* root) {
  Style st;
  if (text.find("\r\n") != std::string::npos) st.eol = "\r\n";
  st.json = root->flow && root->kind == YamlNode::Kind::kMap;
  bool step_found = false, item_found = false;
  std::size_t budget = 20000;
  std::vector<const YamlNode*> todo{root};
  while (!todo.empty() && budget-- > 0 && !(step_found && item_found && st.block.seq_indent >= 0)) {
    const YamlNode* n = todo.back();
    todo.pop_back();
    if (n->flow) continue;
    if (n->kind == YamlNode::Kind::kMap) {
      for (auto it = n->pairs.rbegin(); it != n->pairs.rend(); ++it) {
        const auto [k, v] = *it;
        if (!v->flow && v->kind == YamlNode::Kind::kMap && !v->pairs.empty() && !step_found &&
            v->line > k->line) {
          st.block.step = std::max(1, v->pairs.front().first->column - k->column);
          step_found = true;
        }
        if (!v->flow && v->kind == YamlNode::Kind::kSequence && !v->items.empty() && st.block.seq_indent < 0 &&
            v->line > k->line)
          st.block.seq_indent = std::max(0, v->column - k->column);
        todo.push_back(v);
      }
    } else if (n->kind == YamlNode::Kind::kSequence) {
      for (auto it = n->items.rbegin(); it != n->items.rend(); ++it) {
        const YamlNode* item = *it;
        if (!item->flow && item->kind == YamlNode::Kind::kMap && !item->pairs.empty() && !item_found &&
            item->line == n->line) {
          st.block.item_indent = std::max(2, item->pairs.front().first->column - n->column);
          item_found = true;
        }
        todo.push_back(item);
      }
    }
  }
  if (st.block.seq_indent < 0) st.block.seq_indent = st.block.step;
  if (st.json && !root->pairs.empty() && root->pairs.front().first->line > root->line) {
    st.block.step = std::max(1, root->pairs.front().first->column - root->column);
    st.pretty = true;
  }
  return st;
}

std::string pad(int n) { return std::string(static_cast<std::size_t>(std::max(0, n)), ' '); }


struct Edit {
  std::size_t at = 0;
  std::size_t erase = 0;
  std::string insert;
  bool eol_first = false;  // at the end of a text without a final line break: start with one
  // Where the edited collection starts. Collections that end together (a container's mounts and
  // the pod's volumes after it) get their lines innermost first: the later start goes first.
  std::size_t owner = 0;
  // Lines appended to this block collection (an Insertion), else null.
  const YamlNode* appended_to = nullptr;
  std::vector<const PlannedEdit*> entries{};
};

class Editor {
 public:
  Editor(const std::string& text, const YamlDocument& doc)
      : text_(text), doc_(doc), index_(text), st_(detect_style(text, doc.root)) {}

  EditedText apply(const EditPlan& plan) {
    // Appends to one collection are written together, in plan order; the first edit places them.
    std::vector<std::pair<const YamlNode*, std::vector<const PlannedEdit*>>> appends;
    for (const auto& e : plan.edits) {
      if (e.shared) continue;  // asked for again through an alias: written once
      if (e.op == EditOp::kReplace) {
        replace(e);
        continue;
      }
      auto group = std::find_if(appends.begin(), appends.end(), [&](const auto& a) { return a.first == e.parent; });
      if (group == appends.end()) appends.push_back({e.parent, {&e}});
      else group->second.push_back(&e);
    }
    std::vector<Edit> edits = std::move(edits_);
    for (const auto& [node, entries] : appends) edits.push_back(append_edit(node, entries));
    if (std::any_of(edits.begin(), edits.end(), [](const Edit& e) { return e.eol_first; }))
      if (auto strip = strip_last_block_scalar()) edits.push_back(*strip);
    std::stable_sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) {
      return a.at != b.at ? a.at < b.at : a.owner > b.owner;
    });
    EditedText result;
    std::string& out = result.text;
    out.reserve(text_.size() + 512);
    std::size_t pos = 0;
    for (auto& e : edits) {
      if (e.at < pos) throw Unsupported{"overlapping edits"};
      out.append(text_, pos, e.at - pos);
      if (e.eol_first) result.only_insertions = false;
      if (e.eol_first && !out.empty() && out.back() != '\n') out += st_.eol;
      if (e.appended_to && e.erase == 0 && !e.eol_first)
        result.insertions.push_back({e.appended_to, std::move(e.entries), e.at, out.size(), e.insert.size()});
      else
        result.only_insertions = false;
      out += e.insert;
      pos = e.at + e.erase;
    }
    out.append(text_, pos, std::string::npos);
    return result;
  }

 private:
  const std::string& text_;
  const YamlDocument& doc_;
  TextIndex index_;
  Style st_;
  std::vector<Edit> edits_;

  // `value` by the manifests' renderer, in the document's line endings.
  std::string rendered(const json& value, RenderStyle style) const {
    style.eol = st_.eol;
    auto text = render(value, style);
    if (!text) throw Unsupported{"writing the new lines: " + text.error()};
    return std::move(*text);
  }

  // `value` (a collection with entries) as block lines at `indent`, in `layout`; the first line
  // without its indent when `inline_first`.
  std::string block(const json& value, int indent, bool inline_first, const BlockLayout& layout) const {
    return rendered(value, {.form = RenderStyle::Form::kBlock, .layout = layout, .indent = indent, .inline_first = inline_first});
  }

  // A planned entry's lines: an item of a block sequence, or a member of a block mapping, at `indent`.
  std::string entry(const PlannedEdit& en, RenderStyle::Entry as, int indent, const BlockLayout& layout) const {
    return rendered(en.value, {.form = RenderStyle::Form::kBlock, .layout = layout, .indent = indent, .entry = as, .key = en.key});
  }

  // `value` inside a flow collection or a JSON document: one line of flow YAML or JSON, or pretty
  // JSON whose continuation lines start at `indent`.
  std::string inline_value(const json& value, int indent) const {
    using Form = RenderStyle::Form;
    const Form form = st_.pretty ? Form::kJsonPretty : st_.json ? Form::kJson : Form::kFlow;
    return rendered(value, {.form = form, .layout = st_.block, .indent = indent});
  }

  // Where a new line goes after the text ending at byte `pos`: the start of the next line (or
  // `pos` itself when it already is a line start, as after a block scalar). `eol_first` when the
  // text has no line break left: the insertion must begin with one.
  std::size_t line_after(std::size_t pos, bool& eol_first) const {
    eol_first = false;
    std::size_t back = pos;
    while (back > 0 && (text_[back - 1] == ' ' || text_[back - 1] == '\t')) --back;
    if (pos > 0 && back > 0 && text_[back - 1] == '\n') return back;
    auto nl = text_.find('\n', pos);
    if (nl == std::string::npos) {
      eol_first = true;
      return text_.size();
    }
    return nl + 1;
  }

  // A text without a final line break whose last node is a `|` or `>` block scalar (kubernetes-sigs
  // jobset's gpu-training.yaml): the scalar ends without a line break only because the text does.
  // Lines added after it would give it one, so its header gets the strip indicator ("|" -> "|-"),
  // which keeps its value as it is.
  std::optional<Edit> strip_last_block_scalar() const {
    const YamlNode* n = doc_.root;
    while (n && n->kind != YamlNode::Kind::kScalar && !n->flow)
      n = n->kind == YamlNode::Kind::kMap ? (n->pairs.empty() ? nullptr : n->pairs.back().second)
                                          : (n->items.empty() ? nullptr : n->items.back());
    if (!n || n->kind != YamlNode::Kind::kScalar) return std::nullopt;
    if (n->style != ScalarStyle::kLiteral && n->style != ScalarStyle::kFolded) return std::nullopt;
    if (n->value.ends_with('\n')) return std::nullopt;
    const std::size_t at = index_.byte(n->start);
    const std::size_t eol = std::min(text_.find('\n', at), text_.size());
    const std::string_view header(text_.data() + at, eol - at);
    if (header.empty() || (header[0] != '|' && header[0] != '>')) return std::nullopt;
    const std::string_view indicators = header.substr(1, header.find_first_of(" #") - 1);
    if (indicators.find_first_of("-+") != std::string_view::npos) return std::nullopt;
    return Edit{.at = at + 1, .erase = 0, .insert = "-", .eol_first = false, .owner = n->start};
  }

  // Indentation (spaces) of the line holding byte `pos`.
  int line_indent(std::size_t pos) const {
    std::size_t start = text_.rfind('\n', pos == 0 ? 0 : pos - 1);
    start = start == std::string::npos || pos == 0 ? 0 : start + 1;
    int n = 0;
    while (start + n < text_.size() && text_[start + n] == ' ') ++n;
    return n;
  }


  Edit append_edit(const YamlNode* node, const std::vector<const PlannedEdit*>& entries) {
    const bool seq = node->kind == YamlNode::Kind::kSequence;
    const bool empty = seq ? node->items.empty() : node->pairs.empty();
    if (node->flow) return flow_append(node, entries, seq, empty);
    if (empty) throw Unsupported{"an empty block collection"};
    bool eol_first = false;
    Edit e;
    e.owner = node->start;
    e.at = line_after(index_.byte(node->end), eol_first);
    e.eol_first = eol_first;
    e.appended_to = node;
    e.entries = entries;
    if (seq) {
      BlockLayout layout = st_.block;  // this sequence's own items say where their keys go
      const YamlNode* first = node->items.front();
      if (first->kind == YamlNode::Kind::kMap && !first->flow && !first->pairs.empty() && first->line == node->line)
        layout.item_indent = std::max(2, first->pairs.front().first->column - node->column);
      for (const auto* en : entries) e.insert += entry(*en, RenderStyle::Entry::kItem, node->column, layout);
    } else {
      const int indent = node->pairs.front().first->column;
      for (const auto* en : entries) e.insert += entry(*en, RenderStyle::Entry::kMember, indent, st_.block);
    }
    return e;
  }

  std::string flow_entry(const PlannedEdit& en, bool seq, int indent) const {
    std::string v = inline_value(en.value, indent);
    if (seq) return v;
    return inline_value(json(en.key), indent) + ": " + v;
  }

  Edit flow_append(const YamlNode* node, const std::vector<const PlannedEdit*>& entries, bool seq, bool empty) {
    const std::size_t start = index_.byte(node->start), end = index_.byte(node->end);
    if (end == 0 || end > text_.size() || end <= start) throw Unsupported{"a flow collection without bounds"};
    const char close = seq ? ']' : '}';
    if (text_[end - 1] != close) throw Unsupported{"a flow collection that does not end in its bracket"};
    Edit e;
    e.owner = node->start;
    if (empty) {
      // "[]" / "{}" becomes the collection with the new entries, on one line or as pretty JSON.
      const int indent = line_indent(start);
      e.at = start;
      e.erase = end - start;
      e.insert = seq ? "[" : "{";
      for (std::size_t i = 0; i < entries.size(); ++i) {
        if (st_.pretty) {
          e.insert += (i ? "," : "") + st_.eol + pad(indent + st_.block.step) + flow_entry(*entries[i], seq, indent + st_.block.step);
        } else {
          e.insert += (i ? ", " : "") + flow_entry(*entries[i], seq, 0);
        }
      }
      e.insert += st_.pretty ? st_.eol + pad(indent) + close : std::string(1, close);
      return e;
    }
    // After the last entry, before any spaces, line breaks and the closing bracket.
    std::size_t q = end - 1;
    while (q > start && std::isspace(static_cast<unsigned char>(text_[q - 1]))) --q;
    const bool trailing_comma = text_[q - 1] == ',';
    const bool multiline = text_.find('\n', start) < end - 1;
    if (multiline && text_.substr(start, end - start).find('#') != std::string::npos)
      throw Unsupported{"a multi-line flow collection with comments"};
    e.at = trailing_comma ? q - 1 : q;
    const int indent = multiline ? line_indent(q - 1) : 0;
    for (const auto* en : entries) {
      e.insert += multiline ? "," + st_.eol + pad(indent) : ", ";
      e.insert += flow_entry(*en, seq, indent);
    }
    if (trailing_comma) e.insert += ",";
    e.erase = trailing_comma ? 1 : 0;
    return e;
  }

  void replace(const PlannedEdit& plan) {
    const YamlNode* parent = plan.parent;
    const YamlNode* key = plan.key_node;
    const YamlNode* old = plan.old;
    const json& value = plan.value;
    if (old->anchored) throw Unsupported{"the value at " + plan.path + " carries an anchor"};
    const std::size_t start = index_.byte(old->start), end = index_.byte(old->end);
    if (old->kind == YamlNode::Kind::kScalar && !value.is_structured()) {
      if (old->style == ScalarStyle::kLiteral || old->style == ScalarStyle::kFolded)
        throw Unsupported{"replacing a block scalar"};
      std::string text = st_.json || parent->flow ? inline_value(value, 0)
                                                  : rendered(value, {.form = RenderStyle::Form::kBlock});
      if (!st_.json && value.is_string()) {
        const std::string& s = value.get_ref<const std::string&>();
        if (old->style == ScalarStyle::kDouble) text = json(s).dump(-1, ' ', false, json::error_handler_t::replace);
        if (old->style == ScalarStyle::kSingle && s.find('\'') == std::string::npos && text == s) text = "'" + s + "'";
      }
      edits_.push_back(Edit{.at = start, .erase = end - start, .insert = text, .owner = old->start});
      return;
    }
    if (parent->flow || st_.json) {
      const int indent = line_indent(start);
      std::string text = inline_value(value, indent);
      edits_.push_back(Edit{.at = start, .erase = end - start, .insert = text, .owner = old->start});
      return;
    }
    if (!value.is_structured() || value.empty()) throw Unsupported{"replacing with an empty collection"};
    if (parent->kind == YamlNode::Kind::kSequence) return replace_item(old, value);
    if (old->kind != YamlNode::Kind::kScalar) throw Unsupported{"replacing a block collection"};
    // "key: null" / "key:" in a block mapping: the value moves to the lines below the key.
    std::size_t erase_from = start;
    while (erase_from > 0 && text_[erase_from - 1] == ' ') --erase_from;
    if (end > start) {
      edits_.push_back(
          Edit{.at = erase_from, .erase = end - erase_from, .insert = {}, .eol_first = false, .owner = key->start});
    }
    bool eol_first = false;
    Edit e;
    e.owner = key->start;
    e.at = line_after(std::max(end, index_.byte(key->end)), eol_first);
    e.eol_first = eol_first;
    const int indent = key->column + (value.is_object() ? st_.block.step : st_.block.seq_indent);
    e.insert = block(value, indent, false, st_.block);
    edits_.push_back(std::move(e));
  }

  // An item of a block sequence becomes a mapping: its lines, from just after its "- " to the end
  // of its last line, are written again with the new keys where the old ones began.
  void replace_item(const YamlNode* old, const json& value) {
    if (!value.is_object() || old->flow) throw Unsupported{"replacing a sequence item with this shape"};
    bool eol_first = false;
    Edit e;
    e.owner = old->start;
    e.at = index_.byte(old->start);
    const std::size_t to = line_after(index_.byte(old->end), eol_first);
    e.erase = to - e.at;
    e.insert = block(value, old->column, true, st_.block);
    if (eol_first) e.insert.erase(e.insert.size() - st_.eol.size());  // the text ended without a line break
    edits_.push_back(std::move(e));
  }
};

}  // namespace

Result<EditedText> edit_in_place(const std::string& text, const YamlDocument& doc, const EditPlan& plan) {
  if (!doc.root) return Failure{"empty document", 0, static_cast<int>(EditFailure::kUnsupportedLayout)};
  try {
    return Editor(text, doc).apply(plan);
  } catch (const Unsupported& u) {
    return Failure{u.why, 0, static_cast<int>(EditFailure::kUnsupportedLayout)};
  } catch (const std::exception& e) {
    return Failure{e.what(), 0, static_cast<int>(EditFailure::kUnsupportedLayout)};
  }
}

}  // namespace shmguard::manifests
