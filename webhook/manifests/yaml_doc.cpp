// YAML document splitting, YAML<->JSON, in-place JSON patch, and type-preserving emitters.
#include "manifests/yaml_doc.h"

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace shmguard::manifests {
namespace {

using nlohmann::json;

bool is_separator(const std::string& line) {
  if (line.compare(0, 3, "---") != 0) return false;
  return line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r';
}

struct BudgetExceeded {};
struct Unconvertible {
  std::string why;
  int line;
};

int line_of(const YAML::Node& n) { return n.Mark().line >= 0 ? n.Mark().line + 1 : 0; }

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

enum class ScalarStyle { kPlain, kString, kOther };

ScalarStyle style_of(const YAML::Node& n) {
  const std::string& tag = n.Tag();
  if (tag == "?" || tag.empty()) return ScalarStyle::kPlain;
  if (tag == "!" || tag == "tag:yaml.org,2002:str") return ScalarStyle::kString;
  if (tag.rfind("tag:yaml.org,2002:", 0) == 0) return ScalarStyle::kPlain;
  return ScalarStyle::kOther;  // a custom tag: keep the text as a string
}

json scalar_json(const YAML::Node& n) {
  if (style_of(n) == ScalarStyle::kPlain) return resolve_plain(n.Scalar());
  return n.Scalar();
}

std::string key_text(const YAML::Node& k) {
  if (k.IsScalar()) return k.Scalar();
  if (k.IsNull()) return "null";
  throw Unconvertible{"mapping keys must be scalars", line_of(k)};
}

json convert(const YAML::Node& n, std::size_t& budget) {
  if (budget == 0) throw BudgetExceeded{};
  --budget;
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return scalar_json(n);
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& item : n) a.push_back(convert(item, budget));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[key_text(kv.first)] = convert(kv.second, budget);
      return o;
    }
  }
  return nullptr;
}

YAML::Node from_json(const json& j) {
  switch (j.type()) {
    case json::value_t::object: {
      // Kubernetes writes "name" first in volumes and mounts; keep that reading order.
      YAML::Node m(YAML::NodeType::Map);
      if (auto n = j.find("name"); n != j.end()) m["name"] = from_json(*n);
      for (const auto& [k, v] : j.items())
        if (k != "name") m[k] = from_json(v);
      return m;
    }
    case json::value_t::array: {
      YAML::Node s(YAML::NodeType::Sequence);
      for (const auto& v : j) s.push_back(from_json(v));
      return s;
    }
    case json::value_t::string: {
      YAML::Node s(j.get<std::string>());
      s.SetTag("!");
      return s;
    }
    case json::value_t::null:
      return YAML::Node(YAML::NodeType::Null);
    default: {
      YAML::Node s(j.dump());
      s.SetTag("?");
      return s;
    }
  }
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

bool seq_index(const std::string& tok, std::size_t size, std::size_t& idx) {
  if (!all_digits(tok) || tok.size() > 9) return false;
  idx = std::stoul(tok);
  return idx < size;
}

bool find_key(const YAML::Node& map, const std::string& key) {
  for (const auto& kv : map)
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return true;
  return false;
}

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

class YamlEmitter {
 public:
  explicit YamlEmitter(std::size_t budget) : budget_(budget) {}
  std::string out;

  void document(const YAML::Node& n) {
    if (n.IsMap() && n.size() > 0) {
      map(n, 0, false);
    } else if (n.IsSequence() && n.size() > 0) {
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

  // Scalars, null and empty collections; `indent` is where block-literal lines go.
  std::string inline_value(const YAML::Node& n, int indent) {
    switch (n.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        return "null";
      case YAML::NodeType::Sequence:
        return "[]";
      case YAML::NodeType::Map:
        return "{}";
      case YAML::NodeType::Scalar:
        break;
    }
    const std::string& s = n.Scalar();
    std::string prefix;
    auto st = style_of(n);
    if (st == ScalarStyle::kOther) prefix = n.Tag() + " ";
    if (st == ScalarStyle::kPlain) {
      const std::string& tag = n.Tag();
      if (tag.rfind("tag:yaml.org,2002:", 0) == 0) prefix = "!!" + tag.substr(18) + " ";
      if (!s.empty()) return prefix + s;
      return prefix + "\"\"";
    }
    if (literal_ok(s)) {
      std::size_t trailing = 0;
      while (trailing < s.size() && s[s.size() - 1 - trailing] == '\n') ++trailing;
      std::string body = prefix + (trailing == 0 ? "|-" : trailing == 1 ? "|" : "|+");
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
    return prefix + (needs_quotes(s) ? double_quoted(s) : s);
  }

  static bool is_block(const YAML::Node& n) { return (n.IsMap() || n.IsSequence()) && n.size() > 0; }

  std::string key(const YAML::Node& k) {
    if (!k.IsScalar()) {
      if (k.IsNull()) return "null";
      throw Unconvertible{"mapping keys must be scalars", line_of(k)};
    }
    const std::string& s = k.Scalar();
    if (style_of(k) == ScalarStyle::kPlain && !s.empty()) return s;
    return needs_quotes(s) ? double_quoted(s) : s;
  }

  // `inline_first`: the caller already wrote the indent (and "- ") for the first key.
  void map(const YAML::Node& n, int indent, bool inline_first) {
    bool first = true;
    for (const auto& kv : n) {
      tick();
      if (!(first && inline_first)) out += pad(indent);
      first = false;
      out += key(kv.first);
      out += ':';
      const YAML::Node& v = kv.second;
      if (v.IsMap() && v.size() > 0) {
        out += '\n';
        map(v, indent + 2, false);
      } else if (v.IsSequence() && v.size() > 0) {
        out += '\n';
        seq(v, indent);
      } else {
        out += ' ';
        out += inline_value(v, indent + 2);
        out += '\n';
      }
    }
  }

  void seq(const YAML::Node& n, int indent) {
    for (const auto& item : n) {
      tick();
      out += pad(indent) + "- ";
      if (item.IsMap() && item.size() > 0) {
        map(item, indent + 2, true);
      } else if (item.IsSequence() && item.size() > 0) {
        seq_inline(item, indent + 2);
      } else {
        out += inline_value(item, indent + 2);
        out += '\n';
      }
    }
  }

  void seq_inline(const YAML::Node& n, int indent) {
    bool first = true;
    for (const auto& item : n) {
      tick();
      if (!first) out += pad(indent);
      first = false;
      out += "- ";
      if (item.IsMap() && item.size() > 0) {
        map(item, indent + 2, true);
      } else if (item.IsSequence() && item.size() > 0) {
        seq_inline(item, indent + 2);
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

  void value(const YAML::Node& n, int indent) {
    if (budget_ == 0) throw BudgetExceeded{};
    --budget_;
    if (n.IsMap() && n.size() > 0) {
      out += "{\n";
      bool first = true;
      for (const auto& kv : n) {
        if (!first) out += ",\n";
        first = false;
        out += pad(indent + 1) + json(key_text(kv.first)).dump(-1, ' ', false, json::error_handler_t::replace) + ": ";
        value(kv.second, indent + 1);
      }
      out += "\n" + pad(indent) + "}";
    } else if (n.IsSequence() && n.size() > 0) {
      out += "[\n";
      bool first = true;
      for (const auto& item : n) {
        if (!first) out += ",\n";
        first = false;
        out += pad(indent + 1);
        value(item, indent + 1);
      }
      out += "\n" + pad(indent) + "]";
    } else if (n.IsMap()) {
      out += "{}";
    } else if (n.IsSequence()) {
      out += "[]";
    } else if (n.IsScalar()) {
      out += scalar_json(n).dump(-1, ' ', false, json::error_handler_t::replace);
    } else {
      out += "null";
    }
  }

 private:
  std::size_t budget_;
  static std::string pad(int level) { return std::string(static_cast<std::size_t>(level) * 2, ' '); }
};

}  // namespace

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
  while (std::getline(in_, line)) {
    ++line_;
    bool had_newline = !in_.eof();
    if (is_separator(line) && any) {
      pending_ = line;
      if (had_newline) pending_ += '\n';
      has_pending_ = true;
      return true;
    }
    if (is_separator(line) && !any) out.first_line = line_;
    out.text += line;
    if (had_newline) out.text += '\n';
    any = true;
  }
  done_ = true;
  return any;
}

std::optional<YAML::Node> parse_document(const std::string& text, YamlError& err) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    err.message = e.msg;
    err.line = e.mark.line >= 0 ? e.mark.line + 1 : 0;
  } catch (const std::exception& e) {
    err.message = e.what();
  }
  return std::nullopt;
}

std::optional<json> to_json(const YAML::Node& node, std::size_t budget, YamlError& err) {
  try {
    return convert(node, budget);
  } catch (const BudgetExceeded&) {
    err.message = "document expands to too many nodes (alias expansion?)";
  } catch (const Unconvertible& u) {
    err.message = u.why;
    err.line = u.line;
  } catch (const std::exception& e) {
    err.message = e.what();
  }
  return std::nullopt;
}

bool apply_patch(YAML::Node root, const std::string& prefix, const json& patch, std::string& err) {
  try {
    for (const auto& op : patch) {
      const std::string kind = op.at("op").get<std::string>();
      auto tokens = pointer_tokens(prefix + op.at("path").get<std::string>());
      if (tokens.empty()) {
        err = "cannot patch the document root";
        return false;
      }
      YAML::Node cur;
      cur.reset(root);
      for (std::size_t i = 0; i + 1 < tokens.size(); ++i) {
        const auto& t = tokens[i];
        YAML::Node next;
        if (cur.IsMap() && find_key(cur, t)) {
          next.reset(cur[t]);
        } else if (std::size_t idx = 0; cur.IsSequence() && seq_index(t, cur.size(), idx)) {
          next.reset(cur[idx]);
        } else {
          err = "path " + op.at("path").get<std::string>() + " does not resolve at \"" + t + "\"";
          return false;
        }
        cur.reset(next);
      }
      const std::string& last = tokens.back();
      if (kind == "add" || kind == "replace") {
        YAML::Node value = from_json(op.at("value"));
        if (cur.IsSequence()) {
          std::size_t idx = 0;
          if (kind == "add" && last == "-") {
            cur.push_back(value);
          } else if (seq_index(last, cur.size(), idx) && kind == "replace") {
            cur[idx] = value;
          } else {
            err = "unsupported sequence operation " + kind + " at " + last;
            return false;
          }
        } else if (cur.IsMap() || cur.IsNull()) {
          cur[last] = value;
        } else {
          err = "cannot add a key to a scalar";
          return false;
        }
      } else if (kind == "remove" && cur.IsMap()) {
        cur.remove(last);
      } else {
        err = "unsupported patch operation " + kind;
        return false;
      }
    }
  } catch (const std::exception& e) {
    err = e.what();
    return false;
  }
  return true;
}

std::optional<std::string> emit_yaml(const YAML::Node& node, std::size_t budget, YamlError& err) {
  try {
    YamlEmitter e(budget);
    e.document(node);
    return std::move(e.out);
  } catch (const BudgetExceeded&) {
    err.message = "document expands to too many nodes (alias expansion?)";
  } catch (const Unconvertible& u) {
    err.message = u.why;
    err.line = u.line;
  } catch (const std::exception& ex) {
    err.message = ex.what();
  }
  return std::nullopt;
}

std::optional<std::string> emit_json(const YAML::Node& node, std::size_t budget, int indent, YamlError& err) {
  try {
    JsonEmitter e(budget);
    e.value(node, indent);
    return std::move(e.out);
  } catch (const BudgetExceeded&) {
    err.message = "document expands to too many nodes (alias expansion?)";
  } catch (const Unconvertible& u) {
    err.message = u.why;
    err.line = u.line;
  } catch (const std::exception& ex) {
    err.message = ex.what();
  }
  return std::nullopt;
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

}  // namespace shmguard::manifests
