// `shmguard check`: exit 1 when a training pod template lacks the /dev/shm it needs.
#include <algorithm>
#include <iostream>
#include <sstream>

#include "cli/shared.h"
#include "cli/inputs.h"
#include "cli/observed_flag.h"
#include "cli/report.h"
#include "manifests/conflict_marker.h"
#include "manifests/offline.h"

namespace shmguard::cli {
namespace {

// An input --skip-invalid would skip, named so: the flag is the way on when the file is a values
// file or other YAML that is no manifest (a message that already names it is left as it is).
std::string with_skip_hint(const std::string& error) {
  if (error.find("--skip-invalid") != std::string::npos) return error;
  return error + " (use --skip-invalid to report and skip such files)";
}

int run_check(const ManifestArgs& a) {
  if (a.files.empty()) return fail("check: give the manifests to check: -f FILE|DIR|- (or FILE ...)");
  auto cfg = load_config(a.config_file);
  if (!cfg) return fail(cfg.error());
  auto fail_on = parse_fail_on(a.fail_on);
  if (!fail_on) return fail(fail_on.error());
  auto files = input_files(a);
  if (!files) return fail(files.error());
  std::optional<manifests::Observed> observed;
  if (!a.observed.empty()) {
    auto loaded = load_observed(a.observed);
    if (!loaded) return fail(loaded.error());
    observed = std::move(*loaded);
    (*fail_on).observed = true;
  }
  std::vector<manifests::TemplateRef> refs;  // with --observed: to name the owners no template matched
  std::vector<Record> records, pending;
  Totals totals;
  std::ostringstream none;
  manifests::OfflineRunner runner(*cfg, manifests::OutputFormat::kNone, none);
  runner.set_threads(runner_threads(a));
  runner.set_report_sink([&](const manifests::TemplateReport& r) { 
    Record rec = make_record(r);
    if (observed) {
      apply_observed(*observed, r, cfg->sizing, rec);
      refs.push_back(r.ref);
    }
    rec.failed = fail_on->fails(rec.findings);
    pending.push_back(std::move(rec));
  });
  for (const auto& f : *files) {
    pending.clear();
    if (auto s = open_input(runner, f); !s) {
      // A committed merge conflict is a manifest to fix, never a file to skip.
      if (manifests::is_conflict_marker_error(s.error())) return fail(s.error());
      if (!a.skip_invalid) return fail(with_skip_hint(s.error()));
      totals.skipped_files.push_back(f + ": skipped (--skip-invalid): " + s.error());  // the report lists it, once
      continue;
    }
    for (auto& r : pending) {
      ++totals.templates;
      totals.failed += r.failed;
      for (const auto& fd : r.findings) ++totals.by_rule[static_cast<std::size_t>(fd.rule)];
      records.push_back(std::move(r));
    }
  }
  if (observed) {
    for (auto& ref : refs) ref.context = nullptr;
    totals.observed_without_document = manifests::owners_without_document(*observed, refs);
  }
  std::ostringstream os;
  const auto row = std::find_if(kFormatTable, kFormatTable + kFormatCount,
                                [&](const FormatRow& f) { return a.output == f.name; });  // CLI11 checked it
  render(os, row->format, records, totals, *fail_on);
  std::cout << os.str() << std::flush;
  return totals.failed ? kExitFindings : kExitOk;
}

}  // namespace

void add_check(CLI::App& app, Outcome& out) {
  auto a = std::make_shared<ManifestArgs>();
  a->output = "text";
  auto* c = app.add_subcommand("check", "Exit 1 if a training pod template lacks the /dev/shm it needs");
  set_usage(*c, {.input = "Kubernetes manifests: files, directories (recursively, .yaml/.yml/.json) or - for stdin; "
                         "multi-document YAML or JSON, every kind with a pod template; with --observed, "
                         "`shmguard top -o json` output or the monitor's /metrics text",
                .output = "-o " + format_help() + " on stdout: one finding per pod template, each warning at the "
                          "line of the annotation it is about, a summary",
                .exits = {{kExitOk, "no finding that --fail-on names"},
                          {kExitFindings, "a finding that --fail-on names"},
                          {kExitBadInput, "unreadable or invalid input, or bad flags: the file and line on stderr, "
                                          "nothing on stdout"}}});
  // Needed once, either way: CLI11 would mark both spellings REQUIRED, as if both were.
  c->add_option("-f,--filename,files", a->files,
      "file, directory or - for stdin (repeatable; -f FILE or FILE, at least one is needed)");
  c->add_option("-o,--output", a->output, format_help())->check(CLI::IsMember(format_names()));
  c->add_option("--fail-on", a->fail_on, fail_on_help())
      ->capture_default_str();
  c->add_flag("--skip-invalid", a->skip_invalid, "report and skip files that are not Kubernetes manifests (invalid YAML, a values file, a list, unreadable); "
      "a merge-conflict marker still stops the check");
  add_input_flags(*c, *a,
      "what the cluster saw: `shmguard top -o json` output or the monitor's /metrics (repeatable); a template whose "
      "owner's pods peaked at >= 90% of its size is `outgrown`, one giving over 8x their peak `wasteful`");
  c->callback([a, &out] { out.code = run_check(*a); });
}

}  // namespace shmguard::cli
