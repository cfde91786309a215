// The offline runner (see offline.h): documents read in batches, worked on in parallel, committed
// to the output in input order.
#include "manifests/offline.h"

#include <exception>
#include <string>
#include <string_view>

#include "base/parallel.h"

namespace shmguard::manifests {
namespace {

// A batch ends at whichever comes first; it bounds memory (documents in flight) while giving every
// thread enough documents that none waits long at the batch's end.
constexpr std::size_t kBatchDocuments = 256;
constexpr std::size_t kBatchBytes = 4 << 20;

// Fills `batch` with the next documents; false when there are none.
bool read_batch(DocumentReader& reader, std::vector<RawDocument>& batch, std::size_t& count) {
  count = 0;
  std::size_t bytes = 0;
  while (count < kBatchDocuments && bytes < kBatchBytes) {
    if (count == batch.size()) batch.emplace_back();
    if (!reader.next(batch[count])) break;
    bytes += batch[count].text.size();
    ++count;
  }
  return count > 0;
}

// A worker's call that cannot throw out of its thread: a library exception is an internal error
// of that document.
DocumentOutcome run_guarded(DocumentWorker& worker, const std::string& file, int index, const RawDocument& raw) {
  try {
    return worker.run(file, index, raw);
  } catch (const std::exception& e) {
    DocumentOutcome out;
    out.status = Failure{file + ":" + std::to_string(raw.first_line) + ": internal error: " + e.what()};
    return out;
  }
}

}  // namespace

Status OfflineRunner::process(const std::string& file, std::istream& in) {
  while (workers_.size() < threads_) workers_.push_back(std::make_unique<DocumentWorker>(cfg_, opts_));
  DocumentReader reader(in);
  std::vector<RawDocument> batch;
  std::vector<DocumentOutcome> outcomes;
  std::size_t count = 0;
  int done = 0;  // documents of this file already committed
  while (read_batch(reader, batch, count)) {
    outcomes.assign(count, DocumentOutcome{});
    parallel_for(count, threads_, [&](unsigned w, std::size_t i) {
      outcomes[i] = run_guarded(*workers_[w], file, done + static_cast<int>(i) + 1, batch[i]);
    });
    for (std::size_t i = 0; i < count; ++i)
      if (auto s = commit(done + static_cast<int>(i) + 1, batch[i], outcomes[i]); !s) {
        if (!hold_until_finish_) held_reports_.clear();  // this file's: its reports are not given either
        return s;
      }
    done += static_cast<int>(count);
  }
  if (!hold_until_finish_) give_reports(true);
  return Ok{};
}

namespace {

bool waiting(const TemplateReport& r) { return r.trainjob && !r.trainjob->runtime_seen; }

}  // namespace

// A document's reports after the ones held: a runtime it brings judges the TrainJobs waiting for
// it again; a TrainJob of it whose runtime came earlier is judged with that one.
// A held TrainJob judged again with its runtime, and retouched as the first judgement was.
void OfflineRunner::rejudge(TemplateReport& r, const nlohmann::json& runtime) const {
  judge_trainjob(r, runtime, cfg_);
  if (opts_.retouch) opts_.retouch(r, r.trainjob->object);
}

void OfflineRunner::take_reports(DocumentOutcome& outcome) {
  for (auto& [name, obj] : outcome.runtimes) {
    for (auto& r : held_reports_)
      if (waiting(r) && r.ref.runtime == name) rejudge(r, obj);
    runtimes_.insert_or_assign(name, std::move(obj));
  }
  for (auto& rep : outcome.reports) {
    if (waiting(rep))
      if (auto it = runtimes_.find(rep.ref.runtime); it != runtimes_.end()) rejudge(rep, it->second);
    held_reports_.push_back(std::move(rep));
  }
  give_reports(false);
}

// The held reports up to the first still waiting for its runtime (`all`: every one).
void OfflineRunner::give_reports(bool all) {
  while (!held_reports_.empty() && (all || !waiting(held_reports_.front()))) {
    if (sink_) sink_(held_reports_.front());
    else reports_.push_back(std::move(held_reports_.front()));
    held_reports_.pop_front();
  }
}

// One document's outcome into the output and the reports, in input order.
Status OfflineRunner::commit(int index, const RawDocument& raw, DocumentOutcome& outcome) {
  if (index == 1 && opts_.format == OutputFormat::kYaml && wrote_any_) {
    // Files are concatenated into one stream: the previous file may lack a final newline and
    // this one may not open with "---"; without both, two documents would read as one.
    release_held(true);
    // Directives may only follow a document that "..." ends; otherwise a "---" line separates.
    if (raw.text.starts_with('%')) out_ << "...\n";
    else if (raw.text.compare(0, 3, "---") != 0) out_ << "---\n";
  }
  if (!outcome.status) return std::move(outcome.status);  // its templates were not written: no report says so
  if (opts_.format == OutputFormat::kYaml) write(outcome.text, outcome.text_fixed);
  if (opts_.format == OutputFormat::kJson && !outcome.text.empty()) write_json_document(outcome.text);
  take_reports(outcome);
  return Ok{};
}

namespace {

// A document as a List item: JSON strings never hold a raw newline, so indenting line starts is safe.
void write_item(std::ostream& out, const std::string& doc) {
  std::size_t from = 0;
  for (std::size_t nl; (nl = doc.find('\n', from)) != std::string::npos; from = nl + 1)
    out << "    " << std::string_view(doc).substr(from, nl + 1 - from);
  out << "    " << std::string_view(doc).substr(from);
}

}  // namespace

// One document is written alone; from the second on, every one is an item of a List. So the
// first is held until the second (or the end) says which.
void OfflineRunner::write_json_document(std::string& doc) {
  if (++json_docs_ == 1) {
    first_json_ = std::move(doc);
    return;
  }
  if (json_docs_ == 2) {
    out_ << "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [\n";
    write_item(out_, first_json_);
    first_json_.clear();
  }
  out_ << ",\n";
  write_item(out_, doc);
}

void OfflineRunner::finish() {
  give_reports(true);
  release_held(false);
  if (opts_.format != OutputFormat::kJson) return;
  if (json_docs_ == 0) out_ << "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": []\n}\n";
  else if (json_docs_ == 1) out_ << first_json_ << "\n";
  else out_ << "\n  ]\n}\n";
}

void OfflineRunner::write(std::string& text, std::optional<std::string>& fixed) {
  if (text.empty()) return;
  wrote_any_ = true;
  if (text.back() != '\n') {
    // The last document of a file without a final newline: held back until it is known whether
    // another file follows (then it needs one) or not (then it stays byte for byte).
    held_ = std::move(text);
    held_fixed_ = std::move(fixed);
    return;
  }
  out_ << text;
}

void OfflineRunner::release_held(bool more_follows) {
  if (held_.empty()) return;
  if (more_follows) {
    out_ << (held_fixed_ ? *held_fixed_ : held_) << "\n";
  } else {
    out_ << held_;
  }
  held_.clear();
  held_fixed_.reset();
}

}  // namespace shmguard::manifests
