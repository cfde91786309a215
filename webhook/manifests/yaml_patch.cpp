// JSON pointers into YAML trees (the edit plan, edit_plan.h, resolves patches with them).
#include <cctype>

#include "manifests/yaml_internal.h"

namespace shmguard::manifests {

using nlohmann::json;
using namespace internal;

namespace {


YamlNode* find_value(YamlNode* map, const std::string& key) {
  for (auto& [k, v] : map->pairs)
    if (k->kind == YamlNode::Kind::kScalar && k->value == key) return v;
  return nullptr;
}

}  // namespace

std::optional<std::size_t> item_index(const std::string& token, std::size_t size) {
  if (token.empty() || token.size() > 9 || !all_digits(token)) return std::nullopt;
  const std::size_t idx = std::stoul(token);
  return idx < size ? std::optional(idx) : std::nullopt;
}

std::vector<std::string> pointer_tokens(const std::string& ptr) {
  std::vector<std::string> out;
  if (ptr.empty()) return out;
  const std::string_view all = ptr;
  std::size_t pos = 1;
  while (true) {
    const auto next = all.find('/', pos);
    const std::string_view raw = all.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos);
    std::string& tok = out.emplace_back(raw);
    if (raw.find('~') != std::string_view::npos) {  // "~0" is '~', "~1" is '/'; any other '~' stays
      tok.clear();
      for (std::size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] == '~' && i + 1 < raw.size() && (raw[i + 1] == '0' || raw[i + 1] == '1')) {
          tok += raw[i + 1] == '0' ? '~' : '/';
          ++i;
        } else {
          tok += raw[i];
        }
      }
    }
    if (next == std::string_view::npos) break;
    pos = next + 1;
  }
  return out;
}

const YamlNode* resolve(const YamlNode* root, const std::string& pointer, const YamlNode** anchor) {
  const YamlNode* cur = root;
  if (anchor) *anchor = cur && cur->anchored ? cur : nullptr;
  for (const auto& t : pointer_tokens(pointer)) {
    if (!cur) return nullptr;
    if (cur->kind == YamlNode::Kind::kMap) {
      cur = find_value(const_cast<YamlNode*>(cur), t);
    } else if (auto idx = cur->kind == YamlNode::Kind::kSequence ? item_index(t, cur->items.size()) : std::nullopt) {
      cur = cur->items[*idx];
    } else {
      return nullptr;
    }
    if (cur && anchor && !*anchor && cur->anchored) *anchor = cur;
  }
  return cur;
}

}  // namespace shmguard::manifests
