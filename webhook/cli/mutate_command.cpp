// `shmguard mutate`: manifests with /dev/shm injected, to stdout or (-i) back into their files.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include "cli/shared.h"
#include "files/rewrite.h"
#include "cli/inputs.h"
#include "cli/observed_flag.h"
#include "cli/report.h"
#include "manifests/offline.h"

namespace shmguard::cli {
namespace {

// Streams a FILE* as an ostream: output goes to an unlinked temporary file first, so memory
// follows the largest document and nothing reaches stdout unless every input was valid.
class FileBuf : public std::streambuf {
 public:
  explicit FileBuf(std::FILE* f) : f_(f) {}

 protected:
  int_type overflow(int_type c) override {
    if (c == traits_type::eof()) return 0;
    return std::fputc(c, f_) == EOF ? traits_type::eof() : c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    return static_cast<std::streamsize>(std::fwrite(s, 1, static_cast<std::size_t>(n), f_));
  }

 private:
  std::FILE* f_;
};

void copy_file(std::FILE* from, std::FILE* to) {
  std::fflush(from);
  std::rewind(from);
  char buf[1 << 16];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, from)) > 0) std::fwrite(buf, 1, n, to);
  std::fflush(to);
}

// One template's line of the report. `written`: its file was written (or printed); when a later
// file's error stopped the run, nothing was, and a line that would have changed says so, as
// check would word it: "would inject 8Gi (not written)".
void print_mutate_report(std::ostream& os, const manifests::TemplateReport& r, bool written) {
  Record rec = make_record(r);
  const bool changed = r.result.mutated();
  rec.decision = written || !changed ? r.summary_done() : r.summary_planned();
  if (!r.reemitted_because.empty())
    rec.decision += (written ? " (document re-emitted: " : " (the document would be re-emitted: ") + r.reemitted_because + ")";
  if (!written && changed) rec.decision += " (not written)";
  render_text_record(os, rec);
}

// The report's lines, held until the run's outcome is known (one line per template, to stderr at
// the end): each in two forms, as done and as not written, in unlinked temporary files so memory
// stays flat over any input. stderr is unbuffered, and a write per line was 13,000 system calls
// over 10,000 documents: the chosen form goes out in 64 KiB writes.
class HeldReport {
 public:
  HeldReport() : done_(std::tmpfile(), close), not_written_(std::tmpfile(), close) {}
  bool ok() const { return done_ && not_written_; }
  void add(const manifests::TemplateReport& r) {
    for (bool written : {true, false}) {
      line_.str({});
      print_mutate_report(line_, r, written);
      const std::string_view text = line_.view();
      std::fwrite(text.data(), 1, text.size(), written ? done_.get() : not_written_.get());
    }
  }
  // Before anything else goes to stderr (an error), so the order stays as it was.
  void print(bool written) { copy_file(written ? done_.get() : not_written_.get(), stderr); }

 private:
  static int close(std::FILE* f) { return std::fclose(f); }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> done_, not_written_;
  std::ostringstream line_;
};

// The reports of `mutate -i`; `kept` are the files that hold their new content.
void print_reports(const std::vector<manifests::TemplateReport>& reports, const std::set<std::string>& kept) {
  std::ostringstream os;
  for (const auto& r : reports) print_mutate_report(os, r, kept.count(r.file) != 0);
  std::cerr << os.view();
}

// With --observed: the runner writes the sizes the figures ask for, and nothing else.
void observe_with(manifests::OfflineRunner& runner, const std::optional<manifests::Observed>& seen, const config::Config& cfg) {
  if (seen)
    runner.set_retouch([&seen, &cfg](manifests::TemplateReport& rep, const nlohmann::json& tmpl) {
      retouch_observed(*seen, cfg, rep, tmpl);
    });
}

// The observed owners no template matched, to stderr.
void print_unmatched(const std::optional<manifests::Observed>& seen, const std::vector<manifests::TemplateRef>& refs) {
  if (!seen) return;
  for (const auto& o : manifests::owners_without_document(*seen, refs))
    std::cerr << "observed: " << o << ": no document in the input\n";
}

int run_mutate_in_place(const config::Config& cfg, const std::vector<std::string>& files, const ManifestArgs& a,
                        const std::optional<manifests::Observed>& seen) {
  if (std::find(files.begin(), files.end(), "-") != files.end()) return fail("--in-place cannot rewrite stdin");
  // Every file is read, mutated and checked for how it can be written before any is written:
  // invalid input or a file that cannot keep its owner changes nothing, and the report says so.
  std::vector<std::pair<files::RewritePlan, std::string>> changed;
  std::vector<manifests::TemplateReport> reports;
  auto stop = [&reports](const std::string& why) {
    print_reports(reports, {});
    return fail(why);
  };
  for (const auto& f : files) {
    std::ostringstream out;
    manifests::OfflineRunner runner(cfg, manifests::OutputFormat::kYaml, out);
    runner.set_threads(runner_threads(a));
    if (a.allow_reformat) runner.allow_reformat();
    observe_with(runner, seen, cfg);
    const auto opened = open_input(runner, f);
    if (opened) runner.finish();
    bool mutated = false;
    for (const auto& r : runner.reports()) {
      mutated = mutated || r.result.mutated();
      reports.push_back(r);
    }
    if (!opened) return stop(opened.error());
    if (!mutated) continue;
    auto plan = files::plan_rewrite(f);
    if (!plan) return stop(plan.error() + "; nothing was written");
    changed.emplace_back(std::move(*plan), out.str());
  }
  std::vector<std::string> kept;
  const auto written = files::rewrite_all(changed, &kept);
  std::set<std::string> now_new(kept.begin(), kept.end());
  if (written)
    for (const auto& change : changed) now_new.insert(change.first.path);
  print_reports(reports, now_new);
  if (!written) return fail(written.error(), kExitBadInput);
  std::vector<manifests::TemplateRef> refs;
  for (const auto& r : reports) refs.push_back(r.ref);
  print_unmatched(seen, refs);
  for (const auto& [plan, text] : changed)
    std::cerr << plan.path << ": rewritten" << (plan.via_link ? " (the symlink's target " + plan.target + ")" : "")
              << "\n";
  return kExitOk;
}

int run_mutate(ManifestArgs a) {
  // With no file, stdin: `helm --post-renderer shmguard --post-renderer-args mutate` as it is.
  if (a.files.empty()) a.files.push_back("-");
  auto loaded = load_config(a.config_file);
  if (!loaded) return fail(loaded.error());
  const config::Config& cfg = *loaded;
  auto files = input_files(a);
  if (!files) return fail(files.error());
  std::optional<manifests::Observed> seen;
  if (!a.observed.empty()) {
    auto figures = load_observed(a.observed);
    if (!figures) return fail(figures.error());
    seen = std::move(*figures);
  }
  if (a.in_place) {
    if (a.output == "json") return fail("--in-place keeps each file's format; it cannot be combined with -o json");
    return run_mutate_in_place(cfg, *files, a, seen);
  }
  // 22 MB of manifests in 4 KiB writes is 5,000 system calls, so both streams get 1 MiB buffers
  // (glibc ignores setvbuf's size without a buffer). stdout's outlives this function: exit flushes it.
  constexpr std::size_t kBuffer = 1 << 20;
  static char stdout_buffer[kBuffer];  // never freed: stdio may still flush it after static destructors
  std::setvbuf(stdout, stdout_buffer, _IOFBF, kBuffer);
  std::unique_ptr<char[]> tmp_buffer(new char[kBuffer]);  // not zeroed; declared before the file: freed after its fclose
  std::FILE* tmp = std::tmpfile();
  if (!tmp) return fail("cannot create a temporary file");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(tmp, std::fclose);
  std::setvbuf(tmp, tmp_buffer.get(), _IOFBF, kBuffer);
  FileBuf filebuf(tmp);
  std::ostream out(&filebuf);
  manifests::OfflineRunner runner(cfg, a.output == "json" ? manifests::OutputFormat::kJson : manifests::OutputFormat::kYaml,
                                  out);
  HeldReport report;
  if (!report.ok()) return fail("cannot create a temporary file");
  std::vector<manifests::TemplateRef> refs;  // with --observed: to name the owners no template matched
  runner.set_report_sink([&report, &refs, &seen](const manifests::TemplateReport& r) {
    report.add(r);
    if (seen) refs.push_back(r.ref), refs.back().context = nullptr;
  });
  runner.set_threads(runner_threads(a));
  if (a.allow_reformat) runner.allow_reformat();
  observe_with(runner, seen, cfg);
  for (const auto& f : *files) {
    if (auto s = open_input(runner, f); !s) {
      report.print(false);  // nothing reaches stdout
      return fail(s.error());
    }
  }
  runner.finish();
  report.print(true);
  print_unmatched(seen, refs);
  out.flush();
  copy_file(tmp, stdout);
  return kExitOk;
}

}  // namespace

void add_mutate(CLI::App& app, Outcome& out) {
  auto a = std::make_shared<ManifestArgs>();
  a->output = "yaml";
  auto* c = app.add_subcommand("mutate", "Print manifests with /dev/shm injected into training pod templates");
  set_usage(*c, {.input = "Kubernetes manifests: files, directories (recursively, .yaml/.yml/.json) or - for stdin (the "
                         "default); multi-document YAML or JSON, every kind with a pod template; with --observed, "
                         "`shmguard top -o json` output or the monitor's /metrics text",
                .output = "-o yaml (default) or json on stdout: every document, in order, those without a change byte "
                          "for byte, the others edited in place; with -i nothing on stdout, the changed files "
                          "rewritten; one report line per pod template on stderr",
                .exits = {{kExitOk, "done (also when nothing needed a change)"},
                          {kExitBadInput, "bad input or usage: the file and line on stderr, nothing on stdout and no "
                                          "file written"}}});
  c->add_option("-f,--filename,files", a->files, "file, directory or - for stdin (repeatable; default: stdin)");
  c->add_option("-o,--output", a->output, "yaml or json")->check(CLI::IsMember({"yaml", "json"}));
  c->add_flag("-i,--in-place", a->in_place,
      "rewrite the files that change (through symlinks, keeping owner, mode and hard links); leave the rest untouched");
  c->add_flag("--allow-reformat", a->allow_reformat,
      "when a document cannot be edited in place (templates sharing a YAML anchor need different edits, a stale value carries an anchor), re-emit it (comments lost, anchor expanded) instead of failing");
  add_input_flags(*c, *a,
      "write the sizes the cluster saw instead (`shmguard top -o json` output or the monitor's /metrics, repeatable): "
      "an outgrown or wasteful template's shmguard.io/size, or its own sizeLimit, set to what its owner's peak needs; "
      "nothing else changes");
  c->callback([a, &out] { out.code = run_mutate(*a); });
}

}  // namespace shmguard::cli
