// Lookups into Kubernetes objects as nlohmann::json, shared by every module that reads pods:
// absent keys and wrong types give null or empty, never an exception.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace shmguard::inject {

// The member `key` of an object, or null (absent, or `parent` is not an object).
inline const nlohmann::json* child(const nlohmann::json& parent, const char* key) {
  if (!parent.is_object()) return nullptr;
  auto it = parent.find(key);
  return it == parent.end() ? nullptr : &*it;
}

// The member `key` when it is an object, else null.
inline const nlohmann::json* object_at(const nlohmann::json& parent, const char* key) {
  const nlohmann::json* c = child(parent, key);
  return c && c->is_object() ? c : nullptr;
}

// The member `key` when it is a string, else "".
inline std::string str_field(const nlohmann::json& obj, const char* key) {
  const nlohmann::json* c = child(obj, key);
  return c && c->is_string() ? c->get<std::string>() : std::string();
}

// How logs and reports name an object: metadata.name, or generateName + "*" for the ones a
// controller creates (the API server picks the suffix after admission).
inline std::string display_name(const nlohmann::json& metadata) {
  std::string name = str_field(metadata, "name");
  if (name.empty() && !str_field(metadata, "generateName").empty()) name = str_field(metadata, "generateName") + "*";
  return name;
}

}  // namespace shmguard::inject
