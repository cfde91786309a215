// `shmguard mutate`: manifests with /dev/shm injected, to stdout or (-i) back into their files.
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/command.h"
#include "cli/files.h"
#include "cli/inputs.h"
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

void copy_to_stdout(std::FILE* from) {
  std::fflush(from);
  std::rewind(from);
  char buf[1 << 16];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, from)) > 0) std::fwrite(buf, 1, n, stdout);
  std::fflush(stdout);
}

// One template's line of the report (a line per template, to stderr).
void print_mutate_report(std::ostream& os, const manifests::TemplateReport& r) {
  Record rec = make_record(r);
  rec.decision = r.summary_done();
  if (!r.reemitted_because.empty()) rec.decision += " (document re-emitted: " + r.reemitted_because + ")";
  render_text_record(os, rec);
}

// The report's lines gathered and written to stderr in chunks of 64 KiB: stderr is unbuffered, and
// a write per line was 13,000 system calls over 10,000 documents. Written out in full before
// anything else goes to stderr (an error) and at the end, so the order stays as it was.
class ReportBuffer {
 public:
  ~ReportBuffer() { flush(); }
  void add(const manifests::TemplateReport& r) {
    print_mutate_report(lines_, r);
    if (lines_.tellp() >= kChunk) flush();
  }
  void flush() {
    std::cerr << lines_.view();
    lines_.str({});
  }

 private:
  static constexpr std::streamoff kChunk = 64 << 10;
  std::ostringstream lines_;
};

int run_mutate_in_place(const config::Config& cfg, const std::vector<std::string>& files, const ManifestArgs& a) {
  // Every file is read, mutated and checked for how it can be written before any is written:
  // invalid input or a file that cannot keep its owner changes nothing.
  std::vector<std::pair<RewritePlan, std::string>> changed;
  std::vector<manifests::TemplateReport> reports;
  for (const auto& f : files) {
    if (f == "-") return fail("--in-place cannot rewrite stdin");
    std::ostringstream out;
    manifests::OfflineRunner runner(cfg, manifests::OutputFormat::kYaml, out);
    runner.set_threads(runner_threads(a));
    if (a.allow_reformat) runner.allow_reformat();
    if (auto s = open_input(runner, f); !s) return fail(s.error());
    runner.finish();
    bool mutated = false;
    for (const auto& r : runner.reports()) {
      mutated = mutated || r.result.mutated();
      reports.push_back(r);
    }
    if (!mutated) continue;
    auto plan = plan_rewrite(f);
    if (!plan) return fail(plan.error() + "; nothing was written");
    changed.emplace_back(std::move(*plan), out.str());
  }
  for (const auto& r : reports) print_mutate_report(std::cerr, r);
  if (auto w = rewrite_all(changed); !w) return fail(w.error(), kExitBadInput);
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
  if (a.in_place) {
    if (a.output == "json") return fail("--in-place keeps each file's format; it cannot be combined with -o json");
    return run_mutate_in_place(cfg, *files, a);
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
  ReportBuffer report;
  runner.set_report_sink([&report](const manifests::TemplateReport& r) { report.add(r); });
  runner.set_threads(runner_threads(a));
  if (a.allow_reformat) runner.allow_reformat();
  for (const auto& f : *files) {
    if (auto s = open_input(runner, f); !s) {
      report.flush();
      return fail(s.error());
    }
  }
  runner.finish();
  report.flush();
  out.flush();
  copy_to_stdout(tmp);
  return kExitOk;
}

}  // namespace

void add_mutate(CLI::App& app, Outcome& out) {
  auto a = std::make_shared<ManifestArgs>();
  a->output = "yaml";
  auto* c = app.add_subcommand("mutate", "Print manifests with /dev/shm injected into training pod templates");
  c->add_option("-f,--filename,files", a->files, "file, directory or - for stdin (repeatable; default: stdin)");
  c->add_option("-o,--output", a->output, "yaml or json")->check(CLI::IsMember({"yaml", "json"}));
  c->add_flag("-i,--in-place", a->in_place,
      "rewrite the files that change (through symlinks, keeping owner, mode and hard links); leave the rest untouched");
  c->add_flag("--allow-reformat", a->allow_reformat,
      "when a document cannot be edited in place (templates sharing a YAML anchor need different edits, a stale value carries an anchor), re-emit it (comments lost, anchor expanded) instead of failing");
  add_input_flags(*c, *a);
  c->callback([a, &out] { out.code = run_mutate(*a); });
}

}  // namespace shmguard::cli
