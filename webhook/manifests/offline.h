// The offline path behind `shmguard mutate` and `shmguard check`: a manifest stream in, the same
// inject_pod() call the webhook makes on every pod template, mutated manifests and a report out.
#pragma once

#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/result.h"
#include "config/config.h"
#include "inject/inject.h"
#include "manifests/templates.h"
#include "manifests/yaml_doc.h"

namespace shmguard::manifests {

enum class OutputFormat { kYaml, kJson, kNone };

struct TemplateReport {
  std::string file;
  int document = 0;  // 1-based index within the file
  int line = 0;      // line of the template's first key (the document's, for a Pod)
  std::string kind;
  std::string name;
  std::string path;
  std::string pointer;  // JSON pointer of the template within its document
  inject::InjectResult result;
  std::vector<int> warning_lines;  // per warning: the line of the annotation it is about, else `line`
  // shmguard.io annotations the API server would refuse (a number or bool where a string must be):
  // line and message. The webhook never sees these (the API server refuses them first).
  std::vector<std::pair<int, std::string>> rejected;
  std::string reemitted_because;   // why the document was re-emitted instead of edited in place
  std::string namespace_name;      // metadata.namespace of the resource that owns the template
  bool training_kind = false;      // inside a Kubeflow training kind (its operator labels the pods)
  std::optional<inject::OwnerProcs> owner_procs;  // the owner's nprocPerNode / numProcPerNode
  nlohmann::json object;           // the template itself, with keep_objects() only

  // The engine's summary as `check` words it, before anything is written: "would inject 12Gi",
  // "ok", "too small: has 1Gi, needs 12Gi", "skipped: ...".
  std::string summary_planned() const;
  // The same as `mutate` words it, once written: "injected 12Gi", "updated to 12Gi (was ...)".
  std::string summary_done() const;
};

class OfflineRunner {
 public:
  OfflineRunner(const config::Config& cfg, OutputFormat format, std::ostream& out)
      : cfg_(cfg), format_(format), out_(out) {}

  // Processes one input. On invalid input the failure says "file:line: message"; documents
  // already written stay in `out` (the caller buffers and discards on error).
  Status process(const std::string& file, std::istream& in);

  // Completes the output (closes the JSON List).
  void finish();

  // Reports go to `sink` as they are made, so memory does not grow with the input; without a
  // sink they are kept and returned by reports().
  void set_report_sink(std::function<void(const TemplateReport&)> sink) { sink_ = std::move(sink); }
  const std::vector<TemplateReport>& reports() const { return reports_; }
  // Reports carry a copy of their template (for `shmguard review`, which sends it to a webhook).
  void keep_objects() { keep_objects_ = true; }
  // Templates sharing an anchor that need different edits: re-emit the document (comments and
  // layout lost, the anchor expanded) instead of failing.
  void allow_reformat() { allow_reformat_ = true; }

 private:
  void write_json_document(const std::string& text);
  void write(const std::string& text, const YamlDocument* doc = nullptr);
  void release_held(bool more_follows);
  Status process_document(const std::string& file, int index, const RawDocument& raw);
  TemplateReport report_template(const std::string& file, int index, const RawDocument& raw,
                                 const TemplateRef& ref) const;
  std::vector<int> warning_lines(const TemplateReport& rep, int first_line) const;
  int annotation_line(const TemplateReport& rep, const std::string& key, int first_line) const;
  void check_annotation_types(const nlohmann::json& tmpl, TemplateReport& rep, int first_line) const;
  Status write_json_tree(const std::function<std::string(int)>& where);
  Status write_changed(const RawDocument& raw, nlohmann::json& doc, std::vector<TemplateReport>& reports,
                       const std::function<std::string(int)>& where);
  Result<std::string> surgical_edit(const RawDocument& raw, nlohmann::json& doc,
                                    const std::vector<TemplateReport>& reports);
  Status reemit(const RawDocument& raw, const std::vector<TemplateReport>& reports, const std::function<std::string(int)>& where);

  const config::Config& cfg_;
  OutputFormat format_;
  std::ostream& out_;
  std::vector<TemplateReport> reports_;
  std::function<void(const TemplateReport&)> sink_;
  YamlDocument ydoc_;        // reused for every document
  YamlDocument check_doc_;   // an edited document read back
  std::size_t node_budget_ = 0;
  bool wrote_any_ = false;
  bool keep_objects_ = false;
  bool allow_reformat_ = false;
  std::string held_;                        // a file's last document, without a final newline
  std::optional<std::string> held_fixed_;   // the same, safe to follow with a newline
  std::string first_json_;   // held back until we know whether to wrap in a List
  int json_docs_ = 0;
};

}  // namespace shmguard::manifests
