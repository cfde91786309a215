// YAML documents with libyaml: parsing into an order-preserving tree, YAML<->JSON, in-place JSON
// patch, and type-preserving emitters (see yaml_doc.h).
#include "manifests/yaml_doc.h"

#include <yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>

#include "base/limits.h"

namespace shmguard::manifests {
namespace {

using nlohmann::json;

bool is_separator(const std::string& line) {
  if (line.compare(0, 3, "---") != 0) return false;
  return line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r';
}

bool is_document_end(const std::string& line) {
  if (line.compare(0, 3, "...") != 0) return false;
  return line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r';
}

struct BudgetExceeded {};
struct Unconvertible {
  std::string why;
  int line;
};


bool all_digits(std::string_view s, std::size_t from = 0) {
  if (from >= s.size()) return false;
  for (std::size_t i = from; i < s.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

bool is_float_text(std::string_view s) {
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  std::size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++frac_digits;
  }
  if (int_digits + frac_digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!all_digits(s, i)) return false;
    return true;
  }
  return i == s.size();
}

bool is_special_float(std::string_view s) {
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) s.remove_prefix(1);
  return s == ".inf" || s == ".Inf" || s == ".INF" || s == ".nan" || s == ".NaN" || s == ".NAN";
}

bool is_null_word(std::string_view s) { return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL"; }

int bool_word(std::string_view s) {
  static const char* kTrue[] = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
  static const char* kFalse[] = {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"};
  for (auto* t : kTrue)
    if (s == t) return 1;
  for (auto* f : kFalse)
    if (s == f) return 0;
  return -1;
}

// Resolves a plain scalar the way Kubernetes' YAML reader (YAML 1.1 flavoured) does.
json resolve_plain(const std::string& s) {
  if (is_null_word(s)) return nullptr;
  if (int b = bool_word(s); b >= 0) return b == 1;
  std::string_view v = s;
  bool neg = false;
  std::string_view digits = v;
  if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
    neg = digits[0] == '-';
    digits.remove_prefix(1);
  }
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    bool hex = true;
    for (std::size_t i = 2; i < digits.size(); ++i) hex = hex && std::isxdigit(static_cast<unsigned char>(digits[i]));
    if (hex && digits.size() <= 17) {
      auto u = std::strtoull(std::string(digits.substr(2)).c_str(), nullptr, 16);
      if (u <= static_cast<unsigned long long>(INT64_MAX))
        return neg ? -static_cast<std::int64_t>(u) : static_cast<std::int64_t>(u);
    }
    return s;
  }
  if (all_digits(digits)) {
    bool octal = digits.size() > 1 && digits[0] == '0' && digits.find_first_of("89") == std::string_view::npos;
    if (digits.size() <= 18) {
      auto u = std::strtoll(std::string(digits).c_str(), nullptr, octal ? 8 : 10);
      return neg ? -u : u;
    }
    return std::strtod(s.c_str(), nullptr);
  }
  if (is_float_text(s)) return std::strtod(s.c_str(), nullptr);
  return s;
}

bool plain_tag(const std::string& tag) {
  return tag.empty() || (tag.rfind("tag:yaml.org,2002:", 0) == 0 && tag != "tag:yaml.org,2002:str");
}

json scalar_json(const YamlNode& n) {
  if (n.style == ScalarStyle::kPlain && plain_tag(n.tag)) return resolve_plain(n.value);
  return n.value;
}

std::string key_text(const YamlNode* k) {
  if (k->kind == YamlNode::Kind::kScalar) return k->value;
  throw Unconvertible{"mapping keys must be scalars", k->line};
}

json convert(const YamlNode* n, std::size_t& budget) {
  if (budget == 0) throw BudgetExceeded{};
  --budget;
  switch (n->kind) {
    case YamlNode::Kind::kScalar:
      return scalar_json(*n);
    case YamlNode::Kind::kSequence: {
      json a = json::array();
      for (const auto* item : n->items) a.push_back(convert(item, budget));
      return a;
    }
    case YamlNode::Kind::kMap: {
      json o = json::object();
      for (const auto& [k, v] : n->pairs) o[key_text(k)] = convert(v, budget);
      return o;
    }
  }
  return nullptr;
}

YamlNode* from_json(YamlDocument& doc, const json& j) {
  switch (j.type()) {
    case json::value_t::object: {
      // Kubernetes writes "name" first in volumes and mounts; keep that reading order.
      YamlNode* m = doc.make(YamlNode::Kind::kMap);
      auto add = [&](const std::string& k, const json& v) {
        YamlNode* key = doc.make(YamlNode::Kind::kScalar);
        key->style = ScalarStyle::kNew;
        key->value = k;
        m->pairs.emplace_back(key, from_json(doc, v));
      };
      if (auto n = j.find("name"); n != j.end()) add("name", *n);
      for (const auto& [k, v] : j.items())
        if (k != "name") add(k, v);
      return m;
    }
    case json::value_t::array: {
      YamlNode* s = doc.make(YamlNode::Kind::kSequence);
      for (const auto& v : j) s->items.push_back(from_json(doc, v));
      return s;
    }
    case json::value_t::string: {
      YamlNode* s = doc.make(YamlNode::Kind::kScalar);
      s->style = ScalarStyle::kNew;
      s->value = j.get<std::string>();
      return s;
    }
    case json::value_t::null: {
      YamlNode* s = doc.make(YamlNode::Kind::kScalar);
      s->value = "null";
      return s;
    }
    default: {
      YamlNode* s = doc.make(YamlNode::Kind::kScalar);
      s->value = j.dump();
      return s;
    }
  }
}


bool seq_index(const std::string& tok, std::size_t size, std::size_t& idx) {
  if (!all_digits(tok) || tok.size() > 9) return false;
  idx = std::stoul(tok);
  return idx < size;
}

YamlNode* find_value(YamlNode* map, const std::string& key) {
  for (auto& [k, v] : map->pairs)
    if (k->kind == YamlNode::Kind::kScalar && k->value == key) return v;
  return nullptr;
}

// ---- libyaml event loop ----

class Builder {
 public:
  Builder(YamlDocument& doc) : doc_(doc) {}

  bool run(const std::string& text, YamlError& err) {
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
      err.message = "cannot initialise the YAML parser";
      return false;
    }
    std::unique_ptr<yaml_parser_t, void (*)(yaml_parser_t*)> guard(&parser, yaml_parser_delete);
    yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()), text.size());
    int documents = 0;
    for (;;) {
      yaml_event_t ev;
      if (!yaml_parser_parse(&parser, &ev)) {
        err.message = parser.problem ? parser.problem : "invalid YAML";
        if (parser.context) err.message = std::string(parser.context) + ": " + err.message;
        err.line = static_cast<int>(parser.problem_mark.line) + 1;
        return false;
      }
      std::unique_ptr<yaml_event_t, void (*)(yaml_event_t*)> ev_guard(&ev, yaml_event_delete);
      const int line = static_cast<int>(ev.start_mark.line) + 1;
      bool ok = true;
      switch (ev.type) {
        case YAML_STREAM_END_EVENT:
          return true;
        case YAML_DOCUMENT_START_EVENT:
          if (++documents > 1) ok = fail(err, "more than one document in a section (use a \"---\" line between documents)", line);
          break;
        case YAML_SCALAR_EVENT: ok = on_scalar(ev, line, err); break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT: ok = on_collection_start(ev, line, err); break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: on_collection_end(ev); break;
        case YAML_ALIAS_EVENT: ok = on_alias(ev, line, err); break;
        default: break;
      }
      if (!ok) return false;
    }
  }

 private:
  static bool fail(YamlError& err, std::string message, int line, bool limit = false) {
    err.message = std::move(message);
    err.line = line;
    err.limit = limit;
    return false;
  }

  bool on_scalar(const yaml_event_t& ev, int line, YamlError& err) {
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
    if (!attach(n, err)) return false;
    note_end(n->end, n->line);
    return true;
  }

  bool on_collection_start(const yaml_event_t& ev, int line, YamlError& err) {
    const bool seq = ev.type == YAML_SEQUENCE_START_EVENT;
    if (stack_.size() + 1 > kMaxNesting) return fail(err, kNestingError, line, true);
    YamlNode* n = doc_.make(seq ? YamlNode::Kind::kSequence : YamlNode::Kind::kMap);
    n->line = line;
    place(n, ev);
    n->flow = seq ? ev.data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE
                  : ev.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE;
    const yaml_char_t* tag = seq ? ev.data.sequence_start.tag : ev.data.mapping_start.tag;
    if (tag) n->tag = reinterpret_cast<const char*>(tag);
    anchor(seq ? ev.data.sequence_start.anchor : ev.data.mapping_start.anchor, n);
    if (!attach(n, err)) return false;
    stack_.push_back({n, nullptr, n->start, n->line});
    return true;
  }

  void on_collection_end(const yaml_event_t& ev) {
    YamlNode* n = stack_.back().node;
    n->end = n->flow ? ev.end_mark.index : stack_.back().last_end;
    const int end_line = n->flow ? static_cast<int>(ev.end_mark.line) + 1 : stack_.back().last_line;
    n->height = 1;
    for (const YamlNode* c : n->items) n->height = std::max(n->height, c->height + 1);
    for (const auto& [k, v] : n->pairs) n->height = std::max(n->height, v->height + 1);
    stack_.pop_back();
    note_end(n->end, end_line);
  }

  bool on_alias(const yaml_event_t& ev, int line, YamlError& err) {
    auto it = anchors_.find(reinterpret_cast<const char*>(ev.data.alias.anchor));
    if (it == anchors_.end()) return fail(err, "unknown alias", line);
    doc_.has_aliases = true;
    // An alias inside the node it names would expand without end; nesting counts expanded.
    if (it->second->height < 0) return fail(err, "an alias inside the node it refers to (a recursive structure)", line, true);
    if (stack_.size() + static_cast<std::size_t>(it->second->height) > kMaxNesting)
      return fail(err, std::string(kNestingError) + " (alias expanded)", line, true);
    if (!attach(it->second, err)) return false;
    note_end(ev.end_mark.index, static_cast<int>(ev.end_mark.line) + 1);
    return true;
  }

  struct Frame {
    YamlNode* node;
    YamlNode* pending_key;
    std::size_t last_end;  // end of the last key, value or item read in this collection
    int last_line;
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

  bool attach(YamlNode* n, YamlError& err) {
    if (stack_.empty()) {
      doc_.root = n;
      return true;
    }
    Frame& top = stack_.back();
    if (top.node->kind == YamlNode::Kind::kSequence) {
      top.node->items.push_back(n);
    } else if (!top.pending_key) {
      if (n->kind != YamlNode::Kind::kScalar) {
        err.message = "mapping keys must be scalars";
        err.line = n->line;
        return false;
      }
      top.pending_key = n;
    } else {
      top.node->pairs.emplace_back(top.pending_key, n);
      top.pending_key = nullptr;
    }
    return true;
  }
};

// ---- emitters ----

std::string double_quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          static const char* hex = "0123456789abcdef";
          out += "\\x";
          out += hex[u >> 4];
          out += hex[u & 15];
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

bool literal_ok(std::string_view s) {
  if (s.empty() || s.find('\n') == std::string_view::npos) return false;
  if (s[0] == ' ' || s[0] == '\t' || s[0] == '\n') return false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f) return false;
  }
  return true;
}

std::string single_quoted(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

class YamlEmitter {
 public:
  explicit YamlEmitter(std::size_t budget) : budget_(budget) {}
  std::string out;

  void document(const YamlNode* n) {
    if (n->kind == YamlNode::Kind::kMap && !n->pairs.empty()) {
      map(n, 0, false);
    } else if (n->kind == YamlNode::Kind::kSequence && !n->items.empty()) {
      seq(n, 0);
    } else {
      out += inline_value(n, 0);
      out += '\n';
    }
  }

 private:
  std::size_t budget_;

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

  // Scalars and empty collections; `indent` is where block-literal lines go.
  std::string inline_value(const YamlNode* n, int indent) {
    if (n->kind == YamlNode::Kind::kSequence) return tag_prefix(n) + "[]";
    if (n->kind == YamlNode::Kind::kMap) return tag_prefix(n) + "{}";
    const std::string& s = n->value;
    const std::string prefix = tag_prefix(n);
    switch (n->style) {
      case ScalarStyle::kPlain:
        // Numbers, booleans and nulls are single tokens: written back as read, same type. A
        // plain string may have been folded from several lines into text that is not valid
        // plain on one line ("- a - b", "a: b"), so it takes the quoting rules of new strings.
        if (s.empty() || !plain_tag(n->tag) || !resolve_plain(s).is_string() || !needs_quotes(s)) return prefix + s;
        return prefix + double_quoted(s);
      case ScalarStyle::kSingle:
        if (s.find('\n') == std::string::npos) return prefix + single_quoted(s);
        return prefix + double_quoted(s);
      case ScalarStyle::kDouble:
        return prefix + double_quoted(s);
      case ScalarStyle::kLiteral:
      case ScalarStyle::kFolded:
        if (literal_ok(s)) return prefix + literal(s, indent);
        return prefix + double_quoted(s);
      case ScalarStyle::kNew:
        break;
    }
    if (literal_ok(s)) return literal(s, indent);
    return needs_quotes(s) ? double_quoted(s) : s;
  }

  std::string key(const YamlNode* k) {
    if (k->kind != YamlNode::Kind::kScalar) throw Unconvertible{"mapping keys must be scalars", k->line};
    if (k->value.empty()) return tag_prefix(k) + "\"\"";  // an empty plain key cannot be written bare
    if (k->style == ScalarStyle::kLiteral || k->style == ScalarStyle::kFolded || k->value.find('\n') != std::string::npos)
      return double_quoted(k->value);
    return inline_value(k, 0);
  }

  // `inline_first`: the caller already wrote the indent (and "- ") for the first key.
  void map(const YamlNode* n, int indent, bool inline_first) {
    bool first = true;
    for (const auto& [k, v] : n->pairs) {
      tick();
      if (!(first && inline_first)) out += pad(indent);
      first = false;
      out += key(k);
      out += ':';
      if (v->kind == YamlNode::Kind::kMap && !v->pairs.empty()) {
        out += tag_prefix(v).empty() ? "\n" : " " + tag_prefix(v) + "\n";
        map(v, indent + 2, false);
      } else if (v->kind == YamlNode::Kind::kSequence && !v->items.empty()) {
        out += tag_prefix(v).empty() ? "\n" : " " + tag_prefix(v) + "\n";
        seq(v, indent);
      } else {
        std::string value = inline_value(v, indent + 2);
        if (!value.empty()) out += ' ';
        out += value;
        out += '\n';
      }
    }
  }

  void seq(const YamlNode* n, int indent, bool inline_first = false) {
    bool first = true;
    for (const auto* item : n->items) {
      tick();
      if (!(first && inline_first)) out += pad(indent);
      first = false;
      out += "- ";
      if (item->kind == YamlNode::Kind::kMap && !item->pairs.empty() && item->tag.empty()) {
        map(item, indent + 2, true);
      } else if (item->kind == YamlNode::Kind::kSequence && !item->items.empty() && item->tag.empty()) {
        seq(item, indent + 2, true);
      } else if (item->kind != YamlNode::Kind::kScalar && !(item->pairs.empty() && item->items.empty())) {
        out += tag_prefix(item) + "\n";
        if (item->kind == YamlNode::Kind::kMap) map(item, indent + 2, false);
        else seq(item, indent + 2, false);
      } else {
        out += inline_value(item, indent + 2);
        out += '\n';
      }
    }
  }
};

class JsonEmitter {
 public:
  explicit JsonEmitter(std::size_t budget) : budget_(budget) {}
  std::string out;

  void value(const YamlNode* n, int indent) {
    if (budget_ == 0) throw BudgetExceeded{};
    --budget_;
    if (n->kind == YamlNode::Kind::kMap && !n->pairs.empty()) {
      out += "{\n";
      bool first = true;
      for (const auto& [k, v] : n->pairs) {
        if (!first) out += ",\n";
        first = false;
        out += pad(indent + 1) + json(key_text(k)).dump(-1, ' ', false, json::error_handler_t::replace) + ": ";
        value(v, indent + 1);
      }
      out += "\n" + pad(indent) + "}";
    } else if (n->kind == YamlNode::Kind::kSequence && !n->items.empty()) {
      out += "[\n";
      bool first = true;
      for (const auto* item : n->items) {
        if (!first) out += ",\n";
        first = false;
        out += pad(indent + 1);
        value(item, indent + 1);
      }
      out += "\n" + pad(indent) + "]";
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
  static std::string pad(int level) { return std::string(static_cast<std::size_t>(level) * 2, ' '); }
};

}  // namespace

bool YamlNode::is_null() const {
  return kind == Kind::kScalar && style == ScalarStyle::kPlain && plain_tag(tag) && is_null_word(value);
}

namespace {
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
  nodes.emplace_back();
  nodes.back().kind = kind;
  return &nodes.back();
}

bool DocumentReader::next(RawDocument& out) {
  if (done_) return false;
  out.text.clear();
  out.first_line = line_ + 1;
  bool any = false;
  if (has_pending_) {
    out.text = std::move(pending_);
    out.first_line = line_;
    has_pending_ = false;
    any = true;
  }
  std::string line;
  // Directives ("%YAML 1.1", "%TAG ...") belong to the document their "---" opens.
  bool directives = false;
  while (std::getline(in_, line)) {
    ++line_;
    bool had_newline = !in_.eof();
    if (is_separator(line) && any && !directives) {
      pending_ = line;
      if (had_newline) pending_ += '\n';
      has_pending_ = true;
      return true;
    }
    if (is_separator(line) && !any) out.first_line = line_;
    if (line.starts_with('%') && out.text.find_first_not_of(" \t\r\n") == std::string::npos) directives = true;
    if (is_separator(line)) directives = false;
    out.text += line;
    if (had_newline) out.text += '\n';
    any = true;
    // "..." ends a document; what follows (directives, say) starts the next.
    if (!directives && is_document_end(line)) return true;
  }
  done_ = true;
  return any;
}

bool parse_document(const std::string& text, YamlDocument& doc, YamlError& err) {
  doc.nodes.clear();
  doc.root = nullptr;
  doc.has_aliases = false;
  Builder b(doc);
  if (!b.run(text, err)) return false;
  if (doc.root && doc.root->is_null()) doc.root = nullptr;
  return true;
}

namespace {
// Runs a tree walk, turning its budget and shape failures into `err`.
template <typename Walk>
auto guarded(YamlError& err, Walk&& walk) -> std::optional<decltype(walk())> {
  try {
    return walk();
  } catch (const BudgetExceeded&) {
    err.message = "document expands to too many nodes (alias expansion?)";
  } catch (const Unconvertible& u) {
    err.message = u.why;
    err.line = u.line;
  }
  return std::nullopt;
}
}  // namespace

namespace {
// Compares without building the JSON: the read-back check of every edited document is on the
// offline path's hot loop.
bool same(const YamlNode* n, const json& j, std::size_t& budget) {
  if (budget == 0) throw BudgetExceeded{};
  --budget;
  switch (n->kind) {
    case YamlNode::Kind::kScalar:
      return !j.is_structured() && scalar_json(*n) == j;
    case YamlNode::Kind::kSequence:
      if (!j.is_array() || j.size() != n->items.size()) return false;
      for (std::size_t i = 0; i < n->items.size(); ++i)
        if (!same(n->items[i], j[i], budget)) return false;
      return true;
    case YamlNode::Kind::kMap: {
      if (!j.is_object()) return false;
      if (j.size() != n->pairs.size()) return convert(n, budget) == j;  // duplicate keys: last one wins
      for (const auto& [k, v] : n->pairs) {
        auto it = j.find(key_text(k));
        if (it == j.end() || !same(v, *it, budget)) return false;
      }
      return true;
    }
  }
  return false;
}
}  // namespace

bool equals_json(const YamlNode* node, const json& expected, std::size_t budget) {
  if (!node) return expected.is_null();
  try {
    return same(node, expected, budget);
  } catch (const BudgetExceeded&) {
    return false;
  } catch (const Unconvertible&) {
    return false;
  }
}

std::optional<json> to_json(const YamlNode* node, std::size_t budget, YamlError& err) {
  if (!node) return json(nullptr);
  return guarded(err, [&] { return convert(node, budget); });
}

TextIndex::TextIndex(const std::string& text) : size_(text.size()) {
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) bom_ = 3;  // libyaml skips a BOM without counting it
  ascii_ = std::none_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
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

std::vector<std::string> pointer_tokens(const std::string& ptr) {
  std::vector<std::string> out;
  if (ptr.empty()) return out;
  std::size_t pos = 1;
  while (true) {
    auto next = ptr.find('/', pos);
    std::string raw = ptr.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    std::string tok;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '~' && i + 1 < raw.size() && (raw[i + 1] == '0' || raw[i + 1] == '1')) {
        tok += raw[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        tok += raw[i];
      }
    }
    out.push_back(std::move(tok));
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  return out;
}

const YamlNode* resolve(const YamlNode* root, const std::string& pointer, const YamlNode** anchor) {
  const YamlNode* cur = root;
  if (anchor) *anchor = cur && cur->anchored ? cur : nullptr;
  for (const auto& t : pointer_tokens(pointer)) {
    if (!cur) return nullptr;
    std::size_t idx = 0;
    if (cur->kind == YamlNode::Kind::kMap) {
      cur = find_value(const_cast<YamlNode*>(cur), t);
    } else if (cur->kind == YamlNode::Kind::kSequence && seq_index(t, cur->items.size(), idx)) {
      cur = cur->items[idx];
    } else {
      return nullptr;
    }
    if (cur && anchor && !*anchor && cur->anchored) *anchor = cur;
  }
  return cur;
}

namespace {

// The node that holds the last token of `tokens`.
Result<YamlNode*> parent_of(YamlNode* cur, const std::vector<std::string>& tokens, const std::string& path) {
  for (std::size_t i = 0; i + 1 < tokens.size(); ++i) {
    YamlNode* next = nullptr;
    std::size_t idx = 0;
    if (cur->kind == YamlNode::Kind::kMap) next = find_value(cur, tokens[i]);
    else if (cur->kind == YamlNode::Kind::kSequence && seq_index(tokens[i], cur->items.size(), idx)) next = cur->items[idx];
    if (!next) return Result<YamlNode*>::failure("path " + path + " does not resolve at \"" + tokens[i] + "\"");
    cur = next;
  }
  return cur;
}

// "add" or "replace" of `value` at `last` in `parent`; a mapping keeps its key order.
Status put(YamlDocument& doc, YamlNode* parent, const std::string& kind, const std::string& last, YamlNode* value,
           const std::string& path) {
  if (parent->kind == YamlNode::Kind::kSequence) {
    std::size_t idx = 0;
    if (kind == "add" && last == "-") {
      parent->items.push_back(value);
    } else if (seq_index(last, parent->items.size(), idx)) {
      if (kind == "replace") parent->items[idx] = value;
      else parent->items.insert(parent->items.begin() + static_cast<std::ptrdiff_t>(idx), value);
    } else {
      return Status::failure("index " + last + " out of range in " + path);
    }
    return Ok{};
  }
  if (parent->kind != YamlNode::Kind::kMap) return Status::failure("cannot add to a scalar at " + path);
  for (auto& [k, v] : parent->pairs) {
    if (k->kind == YamlNode::Kind::kScalar && k->value == last) {
      v = value;
      return Ok{};
    }
  }
  YamlNode* key = doc.make(YamlNode::Kind::kScalar);
  key->style = ScalarStyle::kNew;
  key->value = last;
  parent->pairs.emplace_back(key, value);
  return Ok{};
}

}  // namespace

Status apply_patch(YamlDocument& doc, const std::string& prefix, const json& patch) {
  try {
    for (const auto& op : patch) {
      const std::string kind = op.at("op").get<std::string>();
      const std::string path = prefix + op.at("path").get<std::string>();
      const auto tokens = pointer_tokens(path);
      if (tokens.empty() || !doc.root) return Status::failure("cannot patch the document root");
      auto parent = parent_of(doc.root, tokens, path);
      if (!parent) return Status::failure(parent.error());
      if (kind == "add" || kind == "replace") {
        if (auto done = put(doc, *parent, kind, tokens.back(), from_json(doc, op.at("value")), path); !done) return done;
      } else if (kind == "remove" && (*parent)->kind == YamlNode::Kind::kMap) {
        std::erase_if((*parent)->pairs, [&](const auto& kv) { return kv.first->value == tokens.back(); });
      } else {
        return Status::failure("unsupported patch operation " + kind);
      }
    }
  } catch (const json::exception& e) {  // a patch of the wrong shape (op, path or value missing)
    return Status::failure(e.what());
  }
  return Ok{};
}


std::optional<std::string> emit_yaml(const YamlNode* node, std::size_t budget, YamlError& err) {
  if (!node) return std::string("null\n");
  return guarded(err, [&] {
    YamlEmitter e(budget);
    e.document(node);
    return std::move(e.out);
  });
}

std::optional<std::string> emit_json(const YamlNode* node, std::size_t budget, int indent, YamlError& err) {
  if (!node) return std::string("null");
  return guarded(err, [&] {
    JsonEmitter e(budget);
    e.value(node, indent);
    return std::move(e.out);
  });
}

bool needs_quotes(std::string_view s) {
  if (s.empty() || is_null_word(s) || bool_word(s) >= 0) return true;
  if (s.front() == ' ' || s.back() == ' ' || s.back() == ':') return true;
  static constexpr std::string_view kIndicators = "-?:,[]{}#&*!|>'\"%@`.";
  if (kIndicators.find(s.front()) != std::string_view::npos) {
    // "./run.sh" or "-c" are fine plain, but keep the rules simple and safe: quote them
    // only when they could read as something other than a string.
    bool risky = s.front() != '.' && s.front() != '-';
    if (s.front() == '-' && (s.size() == 1 || s[1] == ' ' || std::isdigit(static_cast<unsigned char>(s[1])) || s[1] == '.'))
      risky = true;
    if (s.front() == '.' && (is_special_float(s) || is_float_text(s))) risky = true;
    if (s.rfind("---", 0) == 0) risky = true;
    if (risky) return true;
  }
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return true;
  }
  if (s.find(": ") != std::string_view::npos || s.find(" #") != std::string_view::npos) return true;
  if (s.rfind("<<", 0) == 0) return true;
  if (is_special_float(s) || is_float_text(s)) return true;
  json r = resolve_plain(std::string(s));
  if (!r.is_string()) return true;
  if (std::isdigit(static_cast<unsigned char>(s.front())) || s.front() == '+') {
    // Timestamps and sexagesimal numbers in YAML 1.1.
    if (s.find(':') != std::string_view::npos) return true;
    if (s.size() >= 10 && std::isdigit(static_cast<unsigned char>(s[3])) && s[4] == '-') return true;
  }
  return false;
}

std::string yaml_string(std::string_view s, bool in_flow) {
  if (needs_quotes(s) || literal_ok(s) || (in_flow && s.find_first_of(",[]{}") != std::string_view::npos))
    return double_quoted(s);
  return std::string(s);
}

}  // namespace shmguard::manifests
