// Patches fitted to another object (see json_patch_fit.h).
#include "manifests/json_patch_fit.h"

#include <vector>

#include "manifests/yaml_doc.h"

namespace shmguard::manifests {
namespace {

using nlohmann::json;
using Pointer = json::json_pointer;

bool is_index(const std::string& t) {
  return t == "-" || (!t.empty() && t.find_first_not_of("0123456789") == std::string::npos);
}

// `op` rewritten so that its parent exists in `work`: the first missing ancestor is added, with
// the rest of the path built inside its value.
json with_parents(const json& work, const json& op) {
  const Pointer path(op.at("path").get<std::string>());
  if (op.value("op", "") == "replace" && !work.contains(path)) {
    json add = op;
    add["op"] = "add";
    return with_parents(work, add);
  }
  if (op.value("op", "") != "add" || path.empty() || work.contains(path.parent_pointer())) return op;
  const std::vector<std::string> t = pointer_tokens(op.at("path").get<std::string>());
  Pointer existing;
  std::size_t i = 0;
  while (i + 1 < t.size() && work.contains(existing / t[i])) existing /= t[i++];
  json value = op.value("value", json());
  for (std::size_t j = t.size() - 1; j > i; --j)
    value = is_index(t[j]) ? json::array({std::move(value)}) : json{{t[j], std::move(value)}};
  return {{"op", "add"}, {"path", (existing / t[i]).to_string()}, {"value", std::move(value)}};
}

}  // namespace

std::optional<json> fit_patch(const json& target, const json& ops, std::string& why) {
  json work = target;
  json out = json::array();
  try {
    for (const auto& op : ops) {
      json fitted = with_parents(work, op);
      work.patch_inplace(json::array({fitted}));
      out.push_back(std::move(fitted));
    }
  } catch (const json::exception& e) {
    why = std::string("the patch does not apply to the template: ") + e.what();
    return std::nullopt;
  }
  return out;
}

}  // namespace shmguard::manifests
