// JSON pointers into YAML trees (the edit plan, edit_plan.h, resolves patches with them).
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

}  // namespace shmguard::manifests
