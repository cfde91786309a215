// `shmguard observe` (see observe_command.h).
#include "cli/observe_command.h"

#include "cli/shared.h"
#include "cli/exit_codes.h"

#include <memory>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/shm_path.h"
#include "cli/flags.h"
#include "inject/annotations.h"
#include "manifests/yaml_doc.h"
#include "measure/private_shm.h"
#include "measure/sampler.h"
#include "sizing/quantity.h"

namespace shmguard::cli {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kShm = kShmPath;  // base/shm_path.h

// An optional count flag: `dflt` when not given.
Result<std::uint64_t> optional_count(const std::string& flag, const std::string& text, std::uint64_t dflt,
                                     bool zero_ok) {
  if (text.empty()) return dflt;
  return count_flag(flag, text, zero_ok);
}

std::uint64_t round_up(std::uint64_t v, std::uint64_t unit) { return (v + unit - 1) / unit * unit; }

std::string mib(std::uint64_t b) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  os << static_cast<double>(b) / static_cast<double>(sizing::kMi) << " MiB";
  return os.str();
}

void render(std::ostream& os, const ObserveArgs& a, const ObserveReport& r, const config::Config& cfg) {
  if (a.output == "json") {
    nlohmann::json j = {{"peakBytes", r.peak},
                        {"peakAtSeconds", r.peak_at_s},
                        {"baselineBytes", r.baseline},
                        {"durationSeconds", r.duration_s},
                        {"samples", r.samples},
                        {"intervalMs", a.interval_ms},
                        {"exitCode", r.exit_code},
                        {"busError", r.bus_error},
                        {"annotations", r.yaml}};
    if (r.no_proposal.empty()) {
      j["recommendedSize"] = sizing::format_quantity(r.recommended);
      j["recommendedBytes"] = r.recommended;
    } else {
      j["noProposal"] = r.no_proposal;
    }
    if (r.signal) j["signal"] = r.signal;
    if (r.shm_total) j["shmSizeBytes"] = *r.shm_total;
    if (r.sample_size) j["sampleSizeBytes"] = *r.sample_size;
    os << j.dump(2) << "\n";
    return;
  }
  char times[96];
  std::snprintf(times, sizeof times, " at %.2f s of %.2f s", r.peak_at_s, r.duration_s);
  os << "shmguard observe: /dev/shm peak " << mib(r.peak) << " (" << r.peak << " bytes)" << times << "; "
     << r.samples << " samples every " << a.interval_ms << " ms\n";
  if (r.signal) os << "  the command was killed by signal " << r.signal << " (" << ::strsignal(r.signal) << ")\n";
  if (r.bus_error) {
    os << "  /dev/shm was too small: the command died of a bus error after using " << mib(r.peak);
    if (r.shm_total) os << " of the " << mib(*r.shm_total) << " available";
    os << ".\n  Run it again with a larger --shm-size (e.g. --shm-size "
       << sizing::format_quantity(round_up(std::max<std::uint64_t>(r.shm_total.value_or(r.peak) * 4, sizing::kGi), sizing::kGi))
       << ") to measure what it needs.\n";
    return;
  }
  if (!r.no_proposal.empty()) {
    os << "  " << r.no_proposal << "\n";
    return;
  }
  os << "  covers it: shmguard.io/size " << sizing::format_quantity(r.recommended) << " (peak x headroom "
     << sizing::headroom_text(cfg.sizing.headroom_milli) << ", at least min " << sizing::format_quantity(cfg.sizing.min)
     << ")\n";
  if (r.sample_size)
    os << "  implied sample size: " << *r.sample_size << " bytes per sample (peak / procs x (workers x prefetch + 1) x batch)\n";
  os << "  annotations for the pod template:\n" << r.yaml;
}

}  // namespace

std::uint64_t implied_sample_size(std::uint64_t peak, std::uint64_t batch, std::uint64_t workers,
                                  std::uint64_t prefetch, std::uint64_t procs) {
  const std::uint64_t slots = procs * (workers * prefetch + 1) * batch;
  return slots ? (peak + slots - 1) / slots : 0;
}

namespace {

struct Counts {
  std::uint64_t batch = 0, workers = 0, prefetch = 0, procs = 0;
};

// The recommended size and the annotations that give it, from the measured peak.
void conclude(const ObserveArgs& a, const config::Config& cfg, const Counts& n, ObserveReport& r) {
  r.recommended = sizing::size_for_peak(r.peak, cfg.sizing);
  // A run that failed measured something else than the job; one that never touched /dev/shm gives
  // nothing to size from (a sample size of 0 would be refused).
  if (r.exit_code != 0 && !r.bus_error) {
    r.no_proposal = "the command exited with status " + std::to_string(r.exit_code) +
                    ": no annotations proposed (measure a run that succeeds)";
    return;
  }
  if (r.peak == 0 && !r.bus_error) {
    r.no_proposal = "the command never used /dev/shm: no annotations proposed (a DataLoader with num_workers > 0 "
                    "uses it; with 0 workers the default 64 MiB is enough)";
    return;
  }
  nlohmann::json ann = nlohmann::json::object();  // annotation values are strings: "64" comes out quoted
  if (!a.batch.empty()) {
    r.sample_size = implied_sample_size(r.peak, n.batch, n.workers, n.prefetch, n.procs);
    ann[inject::kBatchSizeKey] = std::to_string(n.batch);
    ann[inject::kNumWorkersKey] = std::to_string(n.workers);
    ann[inject::kSampleSizeKey] = sizing::format_quantity(round_up(*r.sample_size, sizing::kKi));
    if (!a.prefetch.empty()) ann[inject::kPrefetchKey] = std::to_string(n.prefetch);
    if (!a.procs.empty()) ann[inject::kProcsKey] = std::to_string(n.procs);
  } else {
    ann[inject::kSizeKey] = sizing::format_quantity(r.recommended);
  }
  auto yaml = manifests::render({{"metadata", {{"annotations", ann}}}}, {.name_first = false});
  r.yaml = yaml ? *yaml : "";
}

// stderr by default; --report FILE; --report - (stdout, which the command's output left).
void deliver(const ObserveArgs& a, const std::string& report) {
  if (a.report_file == "-") {
    std::cout << report << std::flush;
  } else if (!a.report_file.empty()) {
    std::ofstream f(a.report_file, std::ios::trunc);
    if (!(f << report)) std::cerr << "shmguard observe: cannot write " << a.report_file << "\n";
  } else {
    std::cerr << report;
  }
}

}  // namespace

int run_observe(const ObserveArgs& a) {
  config::Config cfg;
  if (!a.config_file.empty()) {
    auto r = config::load_config_file(a.config_file);
    if (!r.ok()) return fail("observe", r.error());
    cfg = (*r);
  }
  if (a.command.empty()) return fail("observe", "give the command after --, e.g. shmguard observe -- python train.py");
  if (a.interval_ms < 1) return fail("observe", "--interval-ms must be at least 1");
  auto batch = optional_count("--batch-size", a.batch, 0, false);
  auto workers = optional_count("--num-workers", a.workers, 0, true);
  auto prefetch = optional_count("--prefetch-factor", a.prefetch, cfg.sizing.prefetch_factor, false);
  auto procs = optional_count("--procs-per-pod", a.procs, 1, false);
  for (const auto* r : {&batch, &workers, &prefetch, &procs})
    if (!*r) return fail("observe", r->error());
  const Counts n{*batch, *workers, *prefetch, *procs};
  if (a.batch.empty() != a.workers.empty()) return fail("observe", "--batch-size and --num-workers go together");

  ObserveReport r;
  if (!a.shm_size.empty()) {
    auto q = sizing::parse_size(a.shm_size);
    if (!q) return fail("observe", "--shm-size: \"" + a.shm_size + "\" " + q.error());
    if (::geteuid() != 0)
      return fail("observe", "--shm-size needs root: it mounts a private tmpfs at /dev/shm in a new mount namespace "
                             "(run as root, or without --shm-size to measure the current /dev/shm)");
    // The command inherits the namespace; so does the sampler.
    if (auto s = measure::private_tmpfs(kShm, *q); !s) return fail("observe", s.error());
  }
  std::uint64_t total = 0;
  r.baseline = measure::used_bytes(kShm, &total);
  if (!a.shm_size.empty()) r.shm_total = total;
  const measure::Sampling sampling{.path = kShm, .interval_ms = a.interval_ms, .baseline = r.baseline,
                                   .stdout_to_stderr = a.report_file == "-"};
  if (int e = measure::sample_command(a.command, sampling, r); e != 0) {
    std::cerr << "shmguard observe: " << a.command[0] << ": " << std::strerror(e) << "\n";
    return e == ENOENT ? kExitNotFound : kExitCannotRun;
  }
  conclude(a, cfg, n, r);
  std::ostringstream report;
  render(report, a, r, cfg);
  deliver(a, report.str());
  return r.exit_code;
}

void add_observe(CLI::App& app, Outcome& out) {
  auto a = std::make_shared<ObserveArgs>();
  auto* c = app.add_subcommand("observe", "Run a command and measure the /dev/shm it uses; say how to annotate it");
  set_usage(*c, {.input = "a command after --, run with this process's stdin, environment and working directory; the "
                         "job's batch size and workers to infer the sample size",
                .output = "the command's stdout and stderr unchanged; the report (-o text or json: the peak, the "
                          "shmguard.io/size that covers it, the implied sample size, annotations for the pod "
                          "template) on stderr, or in --report FILE (- for stdout: the command's stdout then goes to "
                          "stderr)",
                .exits = {{kExitOk, "the command succeeded; any other status is the command's own (128 + N when signal N "
                                    "killed it)"},
                          {kExitCannotRun, "the command cannot be run"},
                          {kExitNotFound, "the command does not exist"},
                          {kExitBadInput, "bad flags (before anything runs)"}}});
  c->add_option("--shm-size", a->shm_size, "run in a private tmpfs of this size at /dev/shm (root)")
      ->type_name("QUANTITY");
  c->add_option("--interval-ms", a->interval_ms, "sampling interval: shorter catches shorter peaks")
      ->capture_default_str();
  c->add_option("-o,--output", a->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  c->add_option("--report", a->report_file,
      "write the report to this file; - for stdout, which then gets no command output (it goes to stderr)");
  c->add_option("--batch-size", a->batch, "the job's batch size: infer the sample size")->type_name("UINT");
  c->add_option("--num-workers", a->workers, "the job's DataLoader num_workers")->type_name("UINT");
  c->add_option("--prefetch-factor", a->prefetch, "the job's prefetch_factor (default from config)")->type_name("UINT");
  c->add_option("--procs-per-pod", a->procs, "processes with their own DataLoader")->type_name("UINT");
  c->add_option("--config", a->config_file, "YAML config file (headroom, min)");
  c->add_option("command", a->command, "the command to run, after --")->required();
  c->callback([a, &out] { out.code = run_observe(*a); });
}

}  // namespace shmguard::cli
