// A patch made for one object (a pod shmguard built) written against another that holds the same
// fields in other places (an Argo template): operations whose parent the target lacks become
// "add"s of the missing parent, as inject_pod itself writes a missing `annotations` or `volumes`.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace shmguard::manifests {

// `ops` (paths within `target`) made to apply to `target`, in order: an "add" below a missing
// parent adds that parent (an object, or an array for "-" and indexes) with the value inside it;
// a "replace" of a missing member is an "add". std::nullopt with `why` set when an operation
// still does not apply (a path through a scalar, an index past the end).
std::optional<nlohmann::json> fit_patch(const nlohmann::json& target, const nlohmann::json& ops, std::string& why);

}  // namespace shmguard::manifests
