// JSON pointers into YAML trees and RFC 6902 patches applied to them in place (a mapping keeps its
// key order; new values are written in the style of new strings).
#include <cctype>

#include "manifests/yaml_internal.h"

namespace shmguard::manifests {

using nlohmann::json;
using namespace internal;

namespace {

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

}  // namespace

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
    if (!next) return Failure{"path " + path + " does not resolve at \"" + tokens[i] + "\""};
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
      return Failure{"index " + last + " out of range in " + path};
    }
    return Ok{};
  }
  if (parent->kind != YamlNode::Kind::kMap) return Failure{"cannot add to a scalar at " + path};
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
      if (tokens.empty() || !doc.root) return Failure{"cannot patch the document root"};
      auto parent = parent_of(doc.root, tokens, path);
      if (!parent) return Failure{parent.error()};
      if (kind == "add" || kind == "replace") {
        if (auto done = put(doc, *parent, kind, tokens.back(), from_json(doc, op.at("value")), path); !done) return done;
      } else if (kind == "remove" && (*parent)->kind == YamlNode::Kind::kMap) {
        std::erase_if((*parent)->pairs, [&](const auto& kv) { return kv.first->value == tokens.back(); });
      } else {
        return Failure{"unsupported patch operation " + kind};
      }
    }
  } catch (const json::exception& e) {  // a patch of the wrong shape (op, path or value missing)
    return Failure{e.what()};
  }
  return Ok{};
}

}  // namespace shmguard::manifests
