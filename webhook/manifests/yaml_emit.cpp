// Writing YAML trees: block YAML that keeps each scalar's type and style, and indented JSON, each
// within a node budget (the quoting rules for new strings: yaml_quote.cpp).
#include <limits>

#include "manifests/yaml_internal.h"

namespace shmguard::manifests {

using nlohmann::json;
using namespace internal;

namespace {

class YamlEmitter {
 public:
  explicit YamlEmitter(std::size_t budget, const BlockLayout& layout = {}) : budget_(budget), layout_(layout) {}
  std::string out;

  void document(const YamlNode* n) {
    if (n->kind == YamlNode::Kind::kMap && !n->pairs.empty()) {
      map(n, 0, false);
    } else if (n->kind == YamlNode::Kind::kSequence && !n->items.empty()) {
      seq(n, 0);
    } else {
      put_inline(n, 0);
      out += '\n';
    }
  }

  // A collection's lines at `indent` (a mapping's keys, a sequence's dashes); `inline_first`: the
  // caller already wrote the first one's indent.
  void block(const YamlNode* n, int indent, bool inline_first) {
    if (n->kind == YamlNode::Kind::kMap) map(n, indent, inline_first);
    else seq(n, indent, inline_first);
  }

 private:
  std::size_t budget_;
  BlockLayout layout_;

  void tick() {
    if (budget_ == 0) throw BudgetExceeded{};
    --budget_;
  }

  static std::string pad(int n) { return std::string(static_cast<std::size_t>(n), ' '); }

  static std::string tag_prefix(const YamlNode* n) {
    if (n->tag.empty()) return "";
    if (n->tag.rfind("tag:yaml.org,2002:", 0) == 0) return "!!" + n->tag.substr(18) + " ";
    return n->tag + " ";
  }

  std::string literal(const std::string& s, int indent) {
    std::size_t trailing = 0;
    while (trailing < s.size() && s[s.size() - 1 - trailing] == '\n') ++trailing;
    std::string body = trailing == 0 ? "|-" : trailing == 1 ? "|" : "|+";
    std::string_view core(s.data(), s.size() - trailing);
    std::size_t start = 0;
    while (true) {
      auto nl = core.find('\n', start);
      auto line = core.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
      body += '\n';
      if (!line.empty()) body += pad(indent) + std::string(line);
      if (nl == std::string_view::npos) break;
      start = nl + 1;
    }
    if (trailing > 1) body += std::string(trailing - 1, '\n');
    return body;
  }

  void put_tag(const YamlNode* n) {
    if (!n->tag.empty()) out += tag_prefix(n);
  }

  // Appends a scalar or an empty collection; `indent` is where block-literal lines go.
  void put_inline(const YamlNode* n, int indent) {
    if (n->kind != YamlNode::Kind::kScalar) {
      put_tag(n);
      out += n->kind == YamlNode::Kind::kSequence ? "[]" : "{}";
      return;
    }
    const std::string& s = n->value;
    switch (n->style) {
      case ScalarStyle::kPlain:
        put_tag(n);
        // Numbers, booleans and nulls are single tokens: written back as read, same type. A
        // plain string may have been folded from several lines into text that is not valid
        // plain on one line ("- a - b", "a: b"), so it takes the quoting rules of new strings.
        if (s.empty() || !plain_tag(n->tag) || !resolve_plain(s).is_string() || !needs_quotes(s)) out += s;
        else out += double_quoted(s);
        return;
      case ScalarStyle::kSingle:
        put_tag(n);
        out += s.find('\n') == std::string::npos ? single_quoted(s) : double_quoted(s);
        return;
      case ScalarStyle::kDouble:
        put_tag(n);
        out += double_quoted(s);
        return;
      case ScalarStyle::kLiteral:
      case ScalarStyle::kFolded:
        put_tag(n);
        out += literal_ok(s) ? literal(s, indent) : double_quoted(s);
        return;
      case ScalarStyle::kNew:
        break;
    }
    if (literal_ok(s)) out += literal(s, indent);
    else if (needs_quotes(s)) out += double_quoted(s);
    else out += s;
  }

  void put_key(const YamlNode* k) {
    if (k->kind != YamlNode::Kind::kScalar) throw Unconvertible{"mapping keys must be scalars", k->line};
    if (k->value.empty()) {  // an empty plain key cannot be written bare
      put_tag(k);
      out += "\"\"";
    } else if (k->style == ScalarStyle::kLiteral || k->style == ScalarStyle::kFolded || k->value.find('\n') != std::string::npos) {
      out += double_quoted(k->value);
    } else {
      put_inline(k, 0);
    }
  }

  // The rest of a key's line before its block value: the value's tag, if any, and the line break.
  void open_block(const YamlNode* v) {
    if (!v->tag.empty()) out.append(" ").append(tag_prefix(v));
    out += '\n';
  }

  // `inline_first`: the caller already wrote the indent (and "- ") for the first key.
  void map(const YamlNode* n, int indent, bool inline_first) {
    bool first = true;
    for (const auto& [k, v] : n->pairs) {
      tick();
      if (!(first && inline_first)) out.append(static_cast<std::size_t>(indent), ' ');
      first = false;
      put_key(k);
      out += ':';
      if (v->kind == YamlNode::Kind::kMap && !v->pairs.empty()) {
        open_block(v);
        map(v, indent + layout_.step, false);
      } else if (v->kind == YamlNode::Kind::kSequence && !v->items.empty()) {
        open_block(v);
        seq(v, indent + layout_.seq_indent);
      } else {
        const std::size_t at = out.size();
        out += ' ';
        put_inline(v, indent + layout_.step);
        if (out.size() == at + 1) out.pop_back();  // nothing after the colon (an empty plain scalar)
        out += '\n';
      }
    }
  }

  void seq(const YamlNode* n, int indent, bool inline_first = false) {
    bool first = true;
    for (const auto* item : n->items) {
      tick();
      if (!(first && inline_first)) out.append(static_cast<std::size_t>(indent), ' ');
      first = false;
      if (item->kind == YamlNode::Kind::kMap && !item->pairs.empty() && item->tag.empty()) {
        out += '-';
        out.append(static_cast<std::size_t>(layout_.item_indent - 1), ' ');
        map(item, indent + layout_.item_indent, true);
        continue;
      }
      out += "- ";
      if (item->kind == YamlNode::Kind::kSequence && !item->items.empty() && item->tag.empty()) {
        seq(item, indent + 2, true);
      } else if (item->kind != YamlNode::Kind::kScalar && !(item->pairs.empty() && item->items.empty())) {
        out += tag_prefix(item) + "\n";
        if (item->kind == YamlNode::Kind::kMap) map(item, indent + 2, false);
        else seq(item, indent + 2, false);
      } else {
        put_inline(item, indent + 2);
        out += '\n';
      }
    }
  }
};

// JSON over lines (`step` columns a level, each line ending in `eol`) or, `flat`, on one line.
class JsonEmitter {
 public:
  JsonEmitter(std::size_t budget, int step, std::string_view eol, bool flat)
      : budget_(budget), step_(step), eol_(eol), flat_(flat) {}
  std::string out;

  // `indent`: the column of this value's closing bracket.
  void value(const YamlNode* n, int indent) {
    if (budget_ == 0) throw BudgetExceeded{};
    --budget_;
    if (n->kind == YamlNode::Kind::kMap && !n->pairs.empty()) {
      out += '{';
      bool first = true;
      for (const auto& [k, v] : n->pairs) {
        open(first, indent);
        out += json(key_text(k)).dump(-1, ' ', false, json::error_handler_t::replace) + ": ";
        value(v, indent + step_);
      }
      close(indent, '}');
    } else if (n->kind == YamlNode::Kind::kSequence && !n->items.empty()) {
      out += '[';
      bool first = true;
      for (const auto* item : n->items) {
        open(first, indent);
        value(item, indent + step_);
      }
      close(indent, ']');
    } else if (n->kind == YamlNode::Kind::kMap) {
      out += "{}";
    } else if (n->kind == YamlNode::Kind::kSequence) {
      out += "[]";
    } else {
      out += scalar_json(*n).dump(-1, ' ', false, json::error_handler_t::replace);
    }
  }

 private:
  std::size_t budget_;
  int step_;
  std::string_view eol_;
  bool flat_;

  void open(bool& first, int indent) {
    if (!first) out += flat_ ? ", " : ",";
    first = false;
    if (!flat_) out.append(eol_).append(static_cast<std::size_t>(indent + step_), ' ');
  }
  void close(int indent, char bracket) {
    if (!flat_) out.append(eol_).append(static_cast<std::size_t>(indent), ' ');
    out += bracket;
  }
};

// New content (nodes made by from_json) as YAML on one line: {name: x, emptyDir: {medium: Memory}}.
class FlowEmitter {
 public:
  explicit FlowEmitter(std::size_t budget) : budget_(budget) {}
  std::string out;

  void value(const YamlNode* n) {
    if (budget_ == 0) throw BudgetExceeded{};
    --budget_;
    if (n->kind == YamlNode::Kind::kScalar) {
      out += scalar(n);
      return;
    }
    const bool map = n->kind == YamlNode::Kind::kMap;
    out += map ? '{' : '[';
    bool first = true;
    auto sep = [&] {
      if (!first) out += ", ";
      first = false;
    };
    if (map) {
      for (const auto& [k, v] : n->pairs) {
        sep();
        out += scalar(k) + ": ";
        value(v);
      }
    } else {
      for (const auto* item : n->items) {
        sep();
        value(item);
      }
    }
    out += map ? '}' : ']';
  }

  // A new string by the quoting rules of new strings in flow context; numbers, bools and nulls as
  // from_json wrote them.
  static std::string scalar(const YamlNode* n) {
    return n->style == ScalarStyle::kNew ? yaml_string(n->value, true) : n->value;
  }

 private:
  std::size_t budget_;
};

std::string with_eol(std::string text, std::string_view eol) {
  if (eol == "\n") return text;
  std::string out;
  out.reserve(text.size() + text.size() / 16);
  for (char c : text) {
    if (c == '\n') out.append(eol);
    else out += c;
  }
  return out;
}

}  // namespace

Result<std::string> emit_yaml(const YamlNode* node, std::size_t budget) {
  if (!node) return std::string("null\n");
  return guarded([&] {
    YamlEmitter e(budget);
    e.document(node);
    return std::move(e.out);
  });
}

Result<std::string> render(const json& value, const RenderStyle& style) {
  constexpr std::size_t budget = std::numeric_limits<std::size_t>::max();
  using Form = RenderStyle::Form;
  using Entry = RenderStyle::Entry;
  const bool entry = style.form == Form::kBlock && style.entry != Entry::kNone;  // a collection of one
  if (!entry && style.form == Form::kBlock && value.is_structured() && value.empty())
    return Failure{"an empty collection is written inline"};
  if (!entry && style.form == Form::kBlock && !value.is_structured())
    return value.is_string() ? yaml_string(value.get_ref<const std::string&>(), false) : value.dump();
  thread_local YamlDocument scratch;  // an arena reused, as parse_document reuses one
  scratch.clear();
  YamlNode* node = from_json(scratch, value, style.name_first);
  if (entry) {
    YamlNode* holder = scratch.make(style.entry == Entry::kItem ? YamlNode::Kind::kSequence : YamlNode::Kind::kMap);
    if (style.entry == Entry::kItem) {
      holder->items.push_back(node);
    } else {
      YamlNode* key = scratch.make(YamlNode::Kind::kScalar);
      key->style = ScalarStyle::kNew;
      key->value = style.key;
      holder->pairs.emplace_back(key, node);
    }
    node = holder;
  }
  return guarded([&] {
    switch (style.form) {
      case Form::kBlock: {
        YamlEmitter e(budget, style.layout);
        e.block(node, style.indent, style.inline_first);
        return with_eol(std::move(e.out), style.eol);
      }
      case Form::kFlow: {
        FlowEmitter e(budget);
        e.value(node);
        return std::move(e.out);
      }
      case Form::kJson:
      case Form::kJsonPretty: {
        JsonEmitter e(budget, style.layout.step, style.eol, style.form == Form::kJson);
        e.value(node, style.indent);
        return std::move(e.out);
      }
    }
    return std::string();
  });
}

Result<std::string> emit_json(const YamlNode* node, std::size_t budget) {
  if (!node) return std::string("null");
  return guarded([&] {
    JsonEmitter e(budget, 2, "\n", false);
    e.value(node, 0);
    return std::move(e.out);
  });
}

}  // namespace shmguard::manifests
