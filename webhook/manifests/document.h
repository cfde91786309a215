// One document of a manifest stream, worked on apart from the stream (offline.h orders and writes
// the outcomes): parsed, its pod templates found and sized by the same inject_pod() call the
// webhook makes, and, when a template changes, edited in place and read back (or re-emitted).
// Nothing here touches the output, so documents can be worked on in parallel, one DocumentWorker
// per thread.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
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
  TemplateRef ref;   // where the template is and what owns it (its `node` cleared: the document is gone)
  inject::InjectResult result;  // its warnings placed: each one's line set
  // shmguard.io annotations the API server would refuse (a number or bool where a string must be),
  // placed at their lines. The webhook never sees these (the API server refuses them first).
  std::vector<inject::Warning> rejected;
  std::string reemitted_because;   // why the document was re-emitted instead of edited in place
  nlohmann::json object;           // the template itself, with keep_objects

  // The engine's summary as `check` words it, before anything is written: "would inject 12Gi",
  // "ok", "too small: has 1Gi, needs 12Gi", "skipped: ...".
  std::string summary_planned() const;
  // The same as `mutate` words it, once written: "injected 12Gi", "updated to 12Gi (was ...)".
  std::string summary_done() const;
};

struct DocumentOptions {
  OutputFormat format = OutputFormat::kYaml;
  bool keep_objects = false;    // reports carry a copy of their template (`shmguard review`)
  bool allow_reformat = false;  // a document that cannot be edited in place is re-emitted instead of failing
};

// What one document comes to. `status` fails with "file:line: message" on invalid input.
struct DocumentOutcome {
  Status status = Ok{};
  std::string text;  // YAML: the document's text (its own bytes unless changed); JSON: one object
  // YAML text without a final newline whose last block scalar keeps its line break: the same with
  // that scalar stripped ("|-"), to be written when another document follows it.
  std::optional<std::string> text_fixed;
  std::vector<TemplateReport> reports;
};

class DocumentWorker {
 public:
  DocumentWorker(const config::Config& cfg, const DocumentOptions& opts) : cfg_(cfg), opts_(opts) {}
  // `file` and `index` (1-based within the file) are for the reports and messages.
  DocumentOutcome run(const std::string& file, int index, const RawDocument& raw);
  // The same for a document the caller has parsed and checked already (fn: the ResourceList):
  // `tree` is raw.text parsed by parse_document, a mapping with a kind that to_json converted
  // within node_budget(raw.text). The worker takes the tree for the turn (swapped with its own
  // arena) and gives it back, unchanged unless the document was re-emitted.
  DocumentOutcome run_parsed(const std::string& file, int index, const RawDocument& raw, YamlDocument& tree);

 private:
  struct Place {
    const std::string& file;
    const RawDocument& raw;
    std::string operator()(int rel_line) const;  // "file:line" of a line of the document
  };
  Status analyze(const Place& at, int index, DocumentOutcome& out);
  TemplateReport report_template(const Place& at, int index, const TemplateRef& ref, const nlohmann::json& tmpl) const;
  void place_warnings(TemplateReport& rep, int first_line) const;
  int annotation_line(const TemplateReport& rep, const std::string& key, int first_line) const;
  void check_annotation_types(const nlohmann::json& tmpl, TemplateReport& rep, int first_line) const;
  Status write(const Place& at, DocumentOutcome& out);
  Status write_unchanged(const Place& at, DocumentOutcome& out);
  Status write_changed(const Place& at, DocumentOutcome& out);
  Result<std::string> surgical_edit(const RawDocument& raw, const std::vector<TemplateReport>& reports);
  Status reemit(const Place& at, DocumentOutcome& out);
  Status set_json(const Place& at, DocumentOutcome& out);

  const config::Config& cfg_;
  const DocumentOptions& opts_;  // the runner's, so its setters hold at any time
  YamlDocument ydoc_;       // the arena, reused for every document this worker takes
  YamlDocument check_doc_;  // an edited document read back
  std::size_t node_budget_ = 0;
};

}  // namespace shmguard::manifests
