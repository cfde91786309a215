// Lookups into Kubernetes objects as nlohmann::json, shared by every module that reads pods,
// pod lists or kubelet summaries: absent keys and wrong types give null or empty, never an
// exception.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace shmguard {

// The member `key` of an object, or null (absent, or `parent` is not an object). A string_view key:
// the object's std::less<> compares it by length and bytes, where a const char* key would be
// strlen'd again at every node of the map walk (the admission hot path makes ~50 lookups per pod).
inline const nlohmann::json* child(const nlohmann::json& parent, std::string_view key) {
  if (!parent.is_object()) return nullptr;
  auto it = parent.find(key);
  return it == parent.end() ? nullptr : &*it;
}

// The member `key` when it is an object, else null.
inline const nlohmann::json* object_at(const nlohmann::json& parent, const char* key) {
  const nlohmann::json* c = child(parent, key);
  return c && c->is_object() ? c : nullptr;
}

// An empty array that outlives every caller.
inline const nlohmann::json& empty_array() {
  static const nlohmann::json kEmpty = nlohmann::json::array();
  return kEmpty;
}

// The member `key` when it is an array, else an empty array: for a range-for over a list.
inline const nlohmann::json& array_items(const nlohmann::json& parent, const char* key) {
  const nlohmann::json* c = child(parent, key);
  return c && c->is_array() ? *c : empty_array();
}
inline const nlohmann::json& array_items(const nlohmann::json* parent, const char* key) {
  return parent ? array_items(*parent, key) : empty_array();
}

// The member `key` when it is a string, else "".
inline std::string str_field(const nlohmann::json& obj, std::string_view key) {
  const nlohmann::json* c = child(obj, key);
  return c && c->is_string() ? c->get<std::string>() : std::string();
}

// How logs and reports name an object: metadata.name, or generateName + "*" for the ones a
// controller creates (the API server picks the suffix after admission).
inline std::string display_name(std::string name, const std::string& generate_name) {
  if (name.empty() && !generate_name.empty()) name = generate_name + "*";
  return name;
}
inline std::string display_name(const nlohmann::json& metadata) {
  return display_name(str_field(metadata, "name"), str_field(metadata, "generateName"));
}

// Text of a label or annotation value; numbers and booleans (offline YAML) become their text.
// std::nullopt when the key is absent or the value is not a scalar.
inline std::optional<std::string> value_text(const nlohmann::json& map, std::string_view key) {
  if (!map.is_object()) return std::nullopt;
  auto it = map.find(key);
  if (it == map.end()) return std::nullopt;
  if (it->is_string()) return it->get_ref<const std::string&>();
  if (it->is_number() || it->is_boolean()) return it->dump();
  return std::nullopt;
}

// A JSON pointer reference token for `key` ("~" -> "~0", "/" -> "~1").
inline std::string escape_pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

}  // namespace shmguard
