// The offline path behind `shmguard mutate`, `check`, `fn` and `review`: a manifest stream in, its
// documents worked on (document.h: the same inject_pod() call the webhook makes on every pod
// template), in parallel when asked, and the mutated manifests and reports written in input order.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <istream>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/result.h"
#include "config/config.h"
#include "manifests/document.h"
#include "manifests/yaml_doc.h"

namespace shmguard::manifests {

class OfflineRunner {
 public:
  OfflineRunner(const config::Config& cfg, OutputFormat format, std::ostream& out)
      : cfg_(cfg), out_(out) {
    opts_.format = format;
  }

  // Processes one input. On invalid input the failure says "file:line: message"; documents
  // before the invalid one stay in `out` (the caller buffers and discards on error), none after.
  Status process(const std::string& file, std::istream& in);

  // Completes the output (closes the JSON List) and gives the reports still held.
  void finish();

  // A TrainJob whose runtime is not in the input so far holds its report (and the ones after it,
  // to keep input order) until the runtime comes or its file ends: then it is reported as judged
  // from spec.trainer alone. With this, held reports wait for later files too, until finish() -
  // for callers that call it and read the reports after it.
  void hold_until_finish() { hold_until_finish_ = true; }

  // Reports go to `sink` as they are made, in input order, so memory does not grow with the
  // input; without a sink they are kept and returned by reports().
  void set_report_sink(std::function<void(const TemplateReport&)> sink) { sink_ = std::move(sink); }
  const std::vector<TemplateReport>& reports() const { return reports_; }
  // Reports carry a copy of their template (for `shmguard review`, which sends it to a webhook).
  void keep_objects() { opts_.keep_objects = true; }
  // Templates sharing an anchor that need different edits: re-emit the document (comments and
  // layout lost, the anchor expanded) instead of failing.
  void allow_reformat() { opts_.allow_reformat = true; }
  // Threads that work on documents (1: the caller's alone). Output and reports are the same for
  // any number.
  void set_threads(unsigned n) { threads_ = n == 0 ? 1 : n; }
  // DocumentOptions::retouch: called on every template's report, from the workers' threads.
  void set_retouch(std::function<void(TemplateReport&, const nlohmann::json&)> f) { opts_.retouch = std::move(f); }

 private:
  Status commit(int index, const RawDocument& raw, DocumentOutcome& outcome);
  void write_json_document(std::string& text);
  void write(std::string& text, std::optional<std::string>& fixed);
  void release_held(bool more_follows);
  void take_reports(DocumentOutcome& outcome);
  void rejudge(TemplateReport& r, const nlohmann::json& runtime) const;
  void give_reports(bool all);

  const config::Config& cfg_;
  DocumentOptions opts_;
  std::ostream& out_;
  unsigned threads_ = 1;
  std::vector<std::unique_ptr<DocumentWorker>> workers_;  // one per thread, made at the first process()
  std::vector<TemplateReport> reports_;
  std::function<void(const TemplateReport&)> sink_;
  bool wrote_any_ = false;
  bool hold_until_finish_ = false;
  std::map<std::string, nlohmann::json> runtimes_;  // every runtime seen so far, by name
  std::deque<TemplateReport> held_reports_;         // from the first TrainJob waiting for its runtime on
  std::string held_;                        // a file's last document, without a final newline
  std::optional<std::string> held_fixed_;   // the same, safe to follow with a newline
  std::string first_json_;   // held back until we know whether to wrap in a List
  int json_docs_ = 0;
};

}  // namespace shmguard::manifests
