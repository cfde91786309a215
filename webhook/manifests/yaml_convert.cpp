// YAML trees as JSON: scalar typing as Kubernetes reads YAML (1.1 words, octal, hex), the tree to
// JSON, a tree compared with JSON without building it, and JSON into new tree nodes.
#include <cctype>
#include <cstdint>
#include <cstdlib>

#include "manifests/yaml_internal.h"

namespace shmguard::manifests {

using nlohmann::json;

namespace internal {

bool all_digits(std::string_view s, std::size_t from) {
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

std::optional<bool> bool_word(std::string_view s) {
  static constexpr std::string_view kTrue[] = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
  static constexpr std::string_view kFalse[] = {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"};
  if (s.size() > 5) return std::nullopt;  // most scalars: longer than every word
  for (auto t : kTrue)
    if (s == t) return true;
  for (auto f : kFalse)
    if (s == f) return false;
  return std::nullopt;
}

// Resolves a plain scalar the way Kubernetes' YAML reader (YAML 1.1 flavoured) does.
bool plain_word(std::string_view s) {
  return !s.empty() && std::isalpha(static_cast<unsigned char>(s[0])) &&
         (s.size() > 5 || std::string_view("nNyYtTfFoO").find(s[0]) == std::string_view::npos);
}

json resolve_plain(const std::string& s) {
  if (plain_word(s)) return s;  // most plain scalars
  if (is_null_word(s)) return nullptr;
  if (auto b = bool_word(s)) return *b;
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

const std::string& key_text(const YamlNode* k) {
  if (k->kind == YamlNode::Kind::kScalar) return k->value;
  throw Unconvertible{"mapping keys must be scalars", k->line};
}

YamlNode* from_json(YamlDocument& doc, const json& j, bool name_first) {
  switch (j.type()) {
    case json::value_t::object: {
      YamlNode* m = doc.make(YamlNode::Kind::kMap);
      for (const auto& [k, v] : kube_members(j, name_first)) {
        YamlNode* key = doc.make(YamlNode::Kind::kScalar);
        key->style = ScalarStyle::kNew;
        key->value = k;
        m->pairs.emplace_back(key, from_json(doc, *v, name_first));
      }
      return m;
    }
    case json::value_t::array: {
      YamlNode* s = doc.make(YamlNode::Kind::kSequence);
      for (const auto& v : j) s->items.push_back(from_json(doc, v, name_first));
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

}  // namespace internal

using namespace internal;

namespace {

json convert(const YamlNode* n, std::size_t& budget) {
  if (budget == 0) throw BudgetExceeded{};
  --budget;
  switch (n->kind) {
    case YamlNode::Kind::kScalar:
      return scalar_json(*n);
    case YamlNode::Kind::kSequence: {
      json a = json::array();
      a.get_ref<json::array_t&>().reserve(n->items.size());
      for (const auto* item : n->items) a.push_back(convert(item, budget));
      return a;
    }
    case YamlNode::Kind::kMap: {
      json o = json::object();
      auto& members = o.get_ref<json::object_t&>();
      for (const auto& [k, v] : n->pairs) members.insert_or_assign(key_text(k), convert(v, budget));
      return o;
    }
  }
  return nullptr;
}

}  // namespace

bool YamlNode::is_null() const {
  return kind == Kind::kScalar && style == ScalarStyle::kPlain && plain_tag(tag) && is_null_word(value);
}

namespace {
// Compares without building the JSON: the read-back check of every edited document is on the
// offline path's hot loop.
bool same(const YamlNode* n, const json& j, std::size_t& budget) {
  if (budget == 0) throw BudgetExceeded{};
  --budget;
  switch (n->kind) {
    case YamlNode::Kind::kScalar:
      // Most scalars are strings: a different text is a different value without resolving it.
      if (j.is_string() && j.get_ref<const std::string&>() != n->value) return false;
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

Result<json> to_json(const YamlNode* node, std::size_t budget) {
  if (!node) return json(nullptr);
  return guarded([&] { return convert(node, budget); });
}

std::vector<std::pair<std::string_view, const json*>> kube_members(const json& o, bool name_first) {
  std::vector<std::pair<std::string_view, const json*>> out;
  if (auto n = o.find("name"); name_first && n != o.end()) out.emplace_back("name", &*n);
  for (const auto& [k, v] : o.items())
    if (!name_first || k != "name") out.emplace_back(k, &v);
  return out;
}

}  // namespace shmguard::manifests
