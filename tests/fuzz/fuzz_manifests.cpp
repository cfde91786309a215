// Fuzz target: the manifest reader and `mutate`. Invalid input must give an error naming the
// input; valid input must produce output that parses again with the same number of documents.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "manifests/offline.h"
#include "manifests/yaml_doc.h"

namespace {
std::size_t documents(const std::string& text, bool& ok) {
  std::istringstream in(text);
  shmguard::manifests::DocumentReader reader(in);
  shmguard::manifests::RawDocument raw;
  std::size_t n = 0;
  ok = true;
  while (reader.next(raw)) {
    shmguard::manifests::YamlDocument doc;
    if (!shmguard::manifests::parse_document(raw.text, doc).ok()) ok = false;
    if (doc.root) ++n;
  }
  return n;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const shmguard::config::Config cfg;
  std::string text(reinterpret_cast<const char*>(data), size);
  std::ostringstream out;
  shmguard::manifests::OfflineRunner runner(cfg, shmguard::manifests::OutputFormat::kYaml, out);
  std::istringstream in(text);
  auto fail = [](const char* why, const std::string& detail) {
    std::fprintf(stderr, "fuzz_manifests: %s\n%s\n", why, detail.c_str());
    std::abort();
  };
  if (auto done = runner.process("fuzz.yaml", in); !done) {
    if (done.error().rfind("fuzz.yaml:", 0) != 0) fail("error does not name the input", done.error());
    return 0;
  }
  runner.finish();
  bool ok_in = false, ok_out = false;
  std::size_t before = documents(text, ok_in);
  std::size_t after = documents(out.str(), ok_out);
  if (!ok_out) fail("output does not parse", out.str());
  if (before != after) fail("document count changed", out.str());
  std::ostringstream json_out;
  shmguard::manifests::OfflineRunner json_runner(cfg, shmguard::manifests::OutputFormat::kJson, json_out);
  std::istringstream in2(text);
  if (json_runner.process("fuzz.yaml", in2)) {
    json_runner.finish();
    if (nlohmann::json::parse(json_out.str(), nullptr, false).is_discarded()) fail("invalid JSON output", json_out.str());
  }
  return 0;
}
