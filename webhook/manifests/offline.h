// The offline path behind `shmguard mutate` and `shmguard check`: a manifest stream in, the same
// inject_pod() call the webhook makes on every pod template, mutated manifests and a report out.
#pragma once

#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "config/config.h"
#include "inject/inject.h"
#include "manifests/yaml_doc.h"

namespace shmguard::manifests {

enum class OutputFormat { kYaml, kJson, kNone };

struct TemplateReport {
  std::string file;
  int document = 0;  // 1-based index within the file
  int line = 0;      // first line of the document
  std::string kind;
  std::string name;
  std::string path;
  std::string pointer;  // JSON pointer of the template within its document
  inject::InjectResult result;

  // "would inject 12Gi", "ok", "too small: has 1Gi, needs 12Gi", "skipped: ..."
  std::string decision_text(bool mutate_wording) const;
  // True when this template is a training pod without enough /dev/shm.
  bool missing_shm() const;
  nlohmann::json to_json() const;
};

class OfflineRunner {
 public:
  OfflineRunner(const config::Config& cfg, OutputFormat format, std::ostream& out)
      : cfg_(cfg), format_(format), out_(out) {}

  // Processes one input. On invalid input returns false with "file:line: message" in `err`;
  // documents already written stay in `out` (the caller buffers and discards on error).
  bool process(const std::string& file, std::istream& in, std::string& err);

  // Completes the output (closes the JSON List).
  void finish();

  // Reports go to `sink` as they are made, so memory does not grow with the input; without a
  // sink they are kept and returned by reports().
  void set_report_sink(std::function<void(const TemplateReport&)> sink) { sink_ = std::move(sink); }
  const std::vector<TemplateReport>& reports() const { return reports_; }

 private:
  void write_json_document(const std::string& text);

  const config::Config& cfg_;
  OutputFormat format_;
  std::ostream& out_;
  std::vector<TemplateReport> reports_;
  std::function<void(const TemplateReport&)> sink_;
  YamlDocument ydoc_;        // reused for every document
  std::string first_json_;   // held back until we know whether to wrap in a List
  int json_docs_ = 0;
};

}  // namespace shmguard::manifests
