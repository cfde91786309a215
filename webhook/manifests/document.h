// One document of a manifest stream, worked on apart from the stream (offline.h orders and writes
// the outcomes): parsed, its pod templates found and sized by the same inject_pod() call the
// webhook makes, and, when a template changes, edited in place and read back (or re-emitted).
// Nothing here touches the output, so documents can be worked on in parallel, one DocumentWorker
// per thread.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "config/config.h"
#include "inject/inject.h"
#include "manifests/places.h"
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
  nlohmann::json object;           // the template itself, with keep_objects (a TrainJob: the TrainJob)
  // Why a template the engine would change is not written: a TrainJob (no template to write),
  // an Argo edit with no place in the template. Its patch is then empty.
  std::string not_written;
  // A TrainJob's object and places, kept to judge it again when its runtime comes in a later
  // document (OfflineRunner); `runtime_seen` once judged with it.
  struct TrainJobSource {
    nlohmann::json object;
    Places places;
    bool runtime_seen = false;
  };
  std::shared_ptr<TrainJobSource> trainjob;

  // The engine's summary as `check` words it, before anything is written: "would inject 12Gi",
  // "ok", "too small: has 1Gi, needs 12Gi", "skipped: ...".
  std::string summary_planned() const;
  // The same as `mutate` words it, once written: "injected 12Gi", "updated to 12Gi (was ...)";
  // "not written: would inject 8Gi (why)" for what was not.
  std::string summary_done() const;
  // The engine's change is in the output.
  bool written() const { return result.mutated() && not_written.empty(); }
};

// Judges a TrainJob's report (`rep.trainjob` set) by the engine: its trainer pod built from
// `runtime` (the runtime object, or null when the input does not hold it: then a warning names
// it), warnings placed, nothing to write.
void judge_trainjob(TemplateReport& rep, const nlohmann::json& runtime, const config::Config& cfg);

// The options the engine is called with on the template at `ref` (what its owner tells it).
inject::InjectOptions engine_options(const TemplateRef& ref);

struct DocumentOptions {
  OutputFormat format = OutputFormat::kYaml;
  bool keep_objects = false;    // reports carry a copy of their template (`shmguard review`)
  bool allow_reformat = false;  // a document that cannot be edited in place is re-emitted instead of failing
  // Called on each template's report after the engine's call, before the document is written,
  // with the template (a TrainJob: the TrainJob), from the worker's thread: it may replace the
  // report's result and patch (`mutate --observed` writes sizes instead of the engine's edits).
  std::function<void(TemplateReport&, const nlohmann::json&)> retouch;
};

// What one document comes to. `status` fails with "file:line: message" on invalid input.
struct DocumentOutcome {
  Status status = Ok{};
  std::string text;  // YAML: the document's text (its own bytes unless changed); JSON: one object
  // YAML text without a final newline whose last block scalar keeps its line break: the same with
  // that scalar stripped ("|-"), to be written when another document follows it.
  std::optional<std::string> text_fixed;
  std::vector<TemplateReport> reports;
  // The TrainingRuntime and ClusterTrainingRuntime objects of the document, by name
  // ("ClusterTrainingRuntime/torch-distributed"), for TrainJobs of other documents.
  std::vector<std::pair<std::string, nlohmann::json>> runtimes;
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
  TemplateReport report_template(const Place& at, int index, const TemplateRef& ref, const nlohmann::json& tmpl,
                                 const std::vector<std::pair<std::string, nlohmann::json>>& runtimes) const;
  void engine_call(const Place& at, TemplateReport& rep, const nlohmann::json& tmpl) const;
  void note_repeats(const Place& at, const YamlNode* tnode, TemplateReport& rep) const;
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
