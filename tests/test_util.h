// Small helpers shared by the C++ tests: files, base64 decoding, YAML -> JSON.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>

#include "manifests/templates.h"
#include "manifests/yaml_doc.h"

namespace shmguard::test {

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

// Decoding written independently of the server's encoder, so a bug in one shows in the other.
inline std::string base64_decode(const std::string& in) {
  static const std::string kChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (in.size() % 4 != 0) throw std::runtime_error("base64 length not a multiple of 4");
  std::string out;
  int val = 0, bits = -8;
  for (char c : in) {
    if (c == '=') break;
    auto pos = kChars.find(c);
    if (pos == std::string::npos) throw std::runtime_error("bad base64 character");
    val = ((val << 6) + static_cast<int>(pos)) & 0xFFFFFF;
    bits += 6;
    if (bits >= 0) {
      out.push_back(static_cast<char>((val >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return out;
}

// Every document of a YAML stream as JSON (null documents skipped).
inline std::vector<nlohmann::json> yaml_documents(const std::string& text) {
  std::istringstream in(text);
  manifests::DocumentReader reader(in);
  manifests::RawDocument raw;
  std::vector<nlohmann::json> out;
  while (reader.next(raw)) {
    manifests::YamlDocument doc;
    if (auto parsed = manifests::parse_document(raw.text, doc); !parsed) throw std::runtime_error(parsed.error());
    if (!doc.root) continue;
    auto j = manifests::to_json(doc.root, raw.text.size() * 16 + 4096);
    if (!j) throw std::runtime_error(j.error());
    out.push_back(*j);
  }
  return out;
}

// The pod templates of a document given as JSON, found as the offline path finds them: in the tree
// of its text (JSON is YAML). The refs' nodes live until the next call on this thread.
inline std::vector<manifests::TemplateRef> templates_of(const nlohmann::json& doc) {
  thread_local manifests::YamlDocument tree;
  if (auto parsed = manifests::parse_document(doc.dump(), tree); !parsed) throw std::runtime_error(parsed.error());
  return manifests::find_templates(tree.root);
}

inline nlohmann::json admission_review(const std::string& api_version, const nlohmann::json& pod,
                                       const std::string& uid = "0d4a1c39-6c5e-4b55-9d0e-2f6f0b3c1a11") {
  return {{"apiVersion", api_version},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", uid},
            {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
            {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
            {"namespace", "default"},
            {"operation", "CREATE"},
            {"object", pod}}}};
}

// The webhook's sizing text for an operator's pod names the env the operator set
// (PET_NPROC_PER_NODE) where offline names the owner's field it came from (`field`): the same
// text once the one is put for the other.
inline std::string sizing_as_offline(std::string text, const std::string& field) {
  const std::string env = "PET_NPROC_PER_NODE";
  if (auto at = text.find(env); at != std::string::npos) text.replace(at, env.size(), field);
  return text;
}

}  // namespace shmguard::test
