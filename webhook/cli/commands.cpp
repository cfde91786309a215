// Command-line parsing and the subcommands (see commands.h). Flags -> options -> the engine.
#include "cli/commands.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "cli/exit_codes.h"
#include "cli/files.h"
#include "cli/flags.h"
#include "cli/krm_function.h"
#include "cli/observe.h"
#include "cli/report.h"
#include "cli/review.h"
#include "cli/top.h"
#include "cli/monitor.h"
#include "config/config.h"
#include "inject/annotations.h"
#include "inject/recognize.h"
#include "manifests/offline.h"
#include "server/log.h"
#include "server/server.h"
#include "sizing/formula.h"
#include "sizing/quantity.h"
#include "version.h"
#include "base/parallel.h"
#include "base/text.h"

namespace shmguard::cli {
namespace fs = std::filesystem;
namespace {
int fail(const std::string& msg, int code = kExitBadInput) {
  std::cerr << "shmguard: " << msg << "\n";
  return code;
}

// The config file, or the defaults when none is given.
Result<config::Config> load_config(const std::string& path) {
  if (path.empty()) return config::Config{};
  return config::load_config_file(path);
}

// ---- size ----
struct SizeArgs {
  std::string batch, workers, sample, prefetch, procs, memory_limit, output = "text", config_file;
};

Result<std::uint64_t> quantity(const std::string& flag, const std::string& text) {
  auto q = sizing::parse_size(text);
  if (!q) return Failure{flag + ": \"" + text + "\" " + q.error()};
  return q;
}

int run_size(const SizeArgs& a) {
  auto cfg = load_config(a.config_file);
  if (!cfg) return fail(cfg.error());
  sizing::SizingInput in;
  auto batch = count_flag("--batch-size", a.batch, false);
  auto workers = count_flag("--num-workers", a.workers, true);
  auto sample = quantity("--sample-size", a.sample);
  for (const auto* r : {&batch, &workers, &sample})
    if (!*r) return fail(r->error());
  in.batch_size = *batch;
  in.num_workers = *workers;
  in.sample_size = *sample;
  if (!a.prefetch.empty()) {
    auto v = count_flag("--prefetch-factor", a.prefetch, false);
    if (!v) return fail(v.error());
    in.prefetch_factor = *v;
  }
  if (!a.procs.empty()) {
    auto v = count_flag("--procs-per-pod", a.procs, false);
    if (!v) return fail(v.error());
    in.procs = *v;
    in.procs_source = "--procs-per-pod";
  }
  if (!a.memory_limit.empty()) {
    auto v = quantity("--memory-limit", a.memory_limit);
    if (!v) return fail(v.error());
    in.memory_limit = *v;
  }
  auto r = sizing::compute_size(in, cfg->sizing);
  if (a.output == "json") {
    nlohmann::json j = {{"sizeLimit", sizing::format_quantity(r.bytes)},
                        {"bytes", r.bytes},
                        {"needBytes", r.need},
                        {"explanation", r.explanation},
                        {"exceedsMemoryLimit", r.exceeds_memory_limit},
                        {"procs", procs_json(r.procs, r.procs_source)},
                        {"warnings", r.warnings}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << sizing::format_quantity(r.bytes) << "\n" << r.explanation << "\n";
    for (const auto& w : r.warnings) std::cerr << "warning: " << w << "\n";
  }
  return kExitOk;
}

// ---- mutate / check ----
struct ManifestArgs {
  std::vector<std::string> files;
  std::vector<std::string> excludes;
  std::string output;
  std::string config_file;
  std::string fail_on = default_fail_on();
  bool in_place = false;
  bool skip_invalid = false;
  bool allow_reformat = false;
  unsigned jobs = 0;  // threads working on documents; 0: one per core
};

// The runner's threads from --jobs (0: one per core).
unsigned runner_threads(const ManifestArgs& a) { return a.jobs ? a.jobs : default_threads(); }

bool excluded(const std::string& path, const std::vector<std::string>& globs) {
  const std::string base = fs::path(path).filename().string();
  return std::any_of(globs.begin(), globs.end(), [&](const std::string& g) {
    return glob_match(g, path) || glob_match(g, base);
  });
}

Result<std::vector<std::string>> input_files(const ManifestArgs& a) {
  auto all = expand_inputs(a.files);
  if (!all) return all;
  std::vector<std::string> files;
  for (auto& f : *all)
    if (f == "-" || !excluded(f, a.excludes)) files.push_back(std::move(f));
  if (files.empty()) return Failure{"no input files found in " + a.files.front()};
  return files;
}

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

void print_mutate_report(const manifests::TemplateReport& r) {
  std::ostringstream os;
  Record rec = make_record(r);
  rec.decision = r.summary_done();
  if (!r.reemitted_because.empty()) rec.decision += " (document re-emitted: " + r.reemitted_because + ")";
  render_text_record(os, rec);
  std::cerr << os.str();
}

Status process_file(manifests::OfflineRunner& runner, const std::string& f) {
  if (f == "-") return runner.process("<stdin>", std::cin);
  std::ifstream in(f, std::ios::binary);
  if (!in) return Failure{f + ": cannot open: " + std::strerror(errno)};
  return runner.process(f, in);
}

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
    if (auto s = process_file(runner, f); !s) return fail(s.error());
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
  for (const auto& r : reports) print_mutate_report(r);
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
  std::FILE* tmp = std::tmpfile();
  if (!tmp) return fail("cannot create a temporary file");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(tmp, std::fclose);
  std::setvbuf(tmp, nullptr, _IOFBF, 1 << 20);  // 22 MB of manifests in 4 KiB writes is 5,000 system calls
  std::setvbuf(stdout, nullptr, _IOFBF, 1 << 20);
  FileBuf filebuf(tmp);
  std::ostream out(&filebuf);
  manifests::OfflineRunner runner(cfg, a.output == "json" ? manifests::OutputFormat::kJson : manifests::OutputFormat::kYaml,
                                  out);
  runner.set_report_sink(print_mutate_report);
  runner.set_threads(runner_threads(a));
  if (a.allow_reformat) runner.allow_reformat();
  for (const auto& f : *files)
    if (auto s = process_file(runner, f); !s) return fail(s.error());
  runner.finish();
  out.flush();
  copy_to_stdout(tmp);
  return kExitOk;
}

int run_check(const ManifestArgs& a) {
  if (a.files.empty()) return fail("check: give the manifests to check: -f FILE|DIR|- (or FILE ...)");
  auto cfg = load_config(a.config_file);
  if (!cfg) return fail(cfg.error());
  auto fail_on = parse_fail_on(a.fail_on);
  if (!fail_on) return fail(fail_on.error());
  auto files = input_files(a);
  if (!files) return fail(files.error());
  const std::map<std::string, Format> formats{{"text", Format::kText},   {"json", Format::kJson},
                                              {"junit", Format::kJunit}, {"sarif", Format::kSarif},
                                              {"github", Format::kGithub}};
  std::vector<Record> records, pending;
  Totals totals;
  std::ostringstream none;
  manifests::OfflineRunner runner(*cfg, manifests::OutputFormat::kNone, none);
  runner.set_threads(runner_threads(a));
  runner.set_report_sink([&](const manifests::TemplateReport& r) { 
    Record rec = make_record(r);
    rec.failed = fail_on->fails(rec.findings);
    pending.push_back(std::move(rec));
  });
  for (const auto& f : *files) {
    pending.clear();
    if (auto s = process_file(runner, f); !s) {
      if (!a.skip_invalid) return fail(s.error());
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
  std::ostringstream os;
  render(os, formats.at(a.output), records, totals, *fail_on);
  std::cout << os.str() << std::flush;
  return totals.failed ? kExitFindings : kExitOk;
}

// ---- serve ----
int run_serve(server::ServeOptions opts, const std::string& log_level) {
  server::Level lvl;
  if (!server::parse_log_level(log_level, lvl)) return fail("--log-level must be debug, info, warn or error");
  server::set_log_level(lvl);
  // Many idle keep-alive connections are fine, but each needs a descriptor.
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // inherited by every thread started below

  server::WebhookServer srv(opts);
  if (auto started = srv.start(); !started) {
    server::log(server::Level::kError, "cannot start", {{"error", started.error()}});
    return fail(started.error(), 1);
  }
  int sig = 0;
  sigwait(&set, &sig);
  server::log(server::Level::kInfo, "signal received", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
  srv.shutdown();
  srv.wait();
  return kExitOk;
}

}  // namespace

namespace {

// Every subcommand's flags, parsed into these.
struct Commands {
  server::ServeOptions serve_opts;
  std::string log_level = "info";
  ManifestArgs mutate_args, check_args;
  SizeArgs size_args;
  ReviewArgs review_args;
  std::string review_wait = "0s";
  ObserveArgs observe_args;
  TopArgs top_args;
  MonitorArgs monitor_args;
  MonitorCheckArgs monitor_check;
  std::string monitor_config;
  std::string top_config;
  std::string fn_config;
  CLI::App *serve = nullptr, *mutate = nullptr, *check = nullptr, *size = nullptr, *review = nullptr,
           *observe = nullptr, *top = nullptr, *monitor = nullptr, *fn = nullptr, *version = nullptr;
};

void add_serve(CLI::App& app, Commands& c) {
  c.serve = app.add_subcommand("serve", "Run the admission webhook (HTTPS) and the metrics listener");
  c.serve->add_option("--tls-cert-file", c.serve_opts.cert_file, "PEM serving certificate (chain)")->required();
  c.serve->add_option("--tls-private-key-file", c.serve_opts.key_file, "PEM private key")->required();
  c.serve->add_option("--config", c.serve_opts.config_file, "YAML config file (re-read on change)");
  c.serve->add_option("--port", c.serve_opts.port, "HTTPS port for /mutate, /healthz, /readyz (0: any)")->capture_default_str();
  c.serve->add_option("--metrics-port", c.serve_opts.metrics_port, "plain HTTP port for /metrics, /healthz, /readyz (-1: off)")
      ->capture_default_str();
  c.serve->add_option("--bind-address", c.serve_opts.bind_address, "address to listen on")->capture_default_str();
  c.serve->add_option("--tls-min-version", c.serve_opts.tls_min_version, "1.2 or 1.3")->capture_default_str();
  c.serve->add_option("--log-level", c.log_level, "debug, info, warn or error")->capture_default_str();
  c.serve->add_option("--threads", c.serve_opts.loop.threads, "event-loop threads (0: one per core)")->capture_default_str();
  c.serve->add_option("--shutdown-delay-ms", c.serve_opts.shutdown_delay_ms, "how long to keep serving after SIGTERM with readiness false")
      ->capture_default_str();
  c.serve->add_option("--reload-interval-ms", c.serve_opts.reload_interval_ms, "how often certificate and config files are checked")
      ->capture_default_str();
  c.serve->add_option("--idle-timeout-ms", c.serve_opts.loop.idle_timeout_ms, "how long a keep-alive connection may wait between requests")
      ->capture_default_str();
  c.serve->add_option("--max-body-bytes", c.serve_opts.loop.max_body_bytes, "largest request body (larger: 413)")->capture_default_str();
  c.serve->add_option("--request-timeout-ms", c.serve_opts.loop.request_timeout_ms, "deadline for the TLS handshake and a whole request")
      ->capture_default_str();
}

void add_mutate_and_check(CLI::App& app, Commands& c) {
  c.mutate_args.output = "yaml";
  c.check_args.output = "text";
  c.mutate = app.add_subcommand("mutate", "Print manifests with /dev/shm injected into training pod templates");
  c.mutate->add_option("-f,--filename,files", c.mutate_args.files, "file, directory or - for stdin (repeatable; default: stdin)");
  c.mutate->add_option("-o,--output", c.mutate_args.output, "yaml or json")->check(CLI::IsMember({"yaml", "json"}));
  c.mutate->add_flag("-i,--in-place", c.mutate_args.in_place,
                   "rewrite the files that change (through symlinks, keeping owner, mode and hard links); leave the rest untouched");
  c.mutate->add_flag("--allow-reformat", c.mutate_args.allow_reformat,
                   "when a document cannot be edited in place (templates sharing a YAML anchor need different edits, a stale value carries an anchor), re-emit it (comments lost, anchor expanded) instead of failing");
  c.mutate->add_option("--exclude", c.mutate_args.excludes, "skip files whose path or name matches this glob (repeatable)");
  c.mutate->add_option("--config", c.mutate_args.config_file, "YAML config file");
  c.mutate->add_option("-j,--jobs", c.mutate_args.jobs, "threads working on documents (0: one per core); output is the same for any")
      ->capture_default_str();
  c.check = app.add_subcommand("check", "Exit 1 if a training pod template lacks the /dev/shm it needs");
  // Needed once, either way: CLI11 would mark both spellings REQUIRED, as if both were.
  c.check->add_option("-f,--filename,files", c.check_args.files,
                      "file, directory or - for stdin (repeatable; -f FILE or FILE, at least one is needed)");
  c.check->add_option("-o,--output", c.check_args.output, "text, json, junit, sarif or github")
      ->check(CLI::IsMember({"text", "json", "junit", "sarif", "github"}));
  c.check->add_option("--fail-on", c.check_args.fail_on, fail_on_help())
      ->capture_default_str();
  c.check->add_option("--exclude", c.check_args.excludes, "skip files whose path or name matches this glob (repeatable)");
  c.check->add_flag("--skip-invalid", c.check_args.skip_invalid, "report and skip files that are not Kubernetes manifests");
  c.check->add_option("--config", c.check_args.config_file, "YAML config file");
  c.check->add_option("-j,--jobs", c.check_args.jobs, "threads working on documents (0: one per core); output is the same for any")
      ->capture_default_str();
}

void add_size_and_review(CLI::App& app, Commands& c) {
  c.size = app.add_subcommand("size", "Compute the /dev/shm size for DataLoader parameters");
  c.size->add_option("--batch-size", c.size_args.batch, "samples per batch, per process")->required()->type_name("UINT");
  c.size->add_option("--num-workers", c.size_args.workers, "DataLoader num_workers, per process")->required()->type_name("UINT");
  c.size->add_option("--sample-size", c.size_args.sample, "bytes per sample (a quantity, e.g. 588Ki)")->required()->type_name("QUANTITY");
  c.size->add_option("--prefetch-factor", c.size_args.prefetch, "DataLoader prefetch_factor (default from config)")->type_name("UINT");
  c.size->add_option("--procs-per-pod", c.size_args.procs, "processes with their own DataLoader")->type_name("UINT");
  c.size->add_option("--memory-limit", c.size_args.memory_limit, "the pod's memory limit (warns when exceeded)")->type_name("QUANTITY");
  c.size->add_option("-o,--output", c.size_args.output, "text or json")->check(CLI::IsMember({"text", "json"}));
  c.size->add_option("--config", c.size_args.config_file, "YAML config file");
  c.review = app.add_subcommand("review", "Ask a running webhook (or the API server) what it does with each pod template of some manifests");
  c.review->add_option("--server", c.review_args.server,
                       "webhook URL, https://host:port[/path] (path default /mutate); with --through-api-server the API "
                       "server's URL (default: in-cluster)");
  c.review->add_option("--ca", c.review_args.ca_file,
                       "PEM CA the serving certificate must chain to (with --through-api-server default: in-cluster)")
      ->check(CLI::ExistingFile);
  c.review->add_option("--server-name", c.review_args.server_name, "name the certificate must be valid for (default: the URL's host)");
  auto* files = c.review->add_option("-f,--filename", c.review_args.files, "file, directory or - for stdin (repeatable)");
  c.review->add_flag("--test-pod", c.review_args.test_pod, "review a built-in PyTorch training pod (what `helm test` does)")
      ->excludes(files);
  c.review->add_flag("--expect-injected", c.review_args.expect_injected, "exit 1 unless every answer injects /dev/shm");
  c.review->add_option("-o,--output", c.review_args.output, "text or json")->check(CLI::IsMember({"text", "json"}));
  c.review->add_option("--timeout", c.review_args.timeout_s, "seconds to connect, send and read")->capture_default_str();
  c.review->add_flag("--through-api-server", c.review_args.through_api_server,
                     "create each pod through the API server as a server-side dry run (never stored): the answer "
                     "comes the whole way API server -> Service -> webhook pod (the chart's install check)");
  c.review->add_option("--token-file", c.review_args.token_file,
                       "bearer token for the API server (default: the pod's service account token)");
  c.review->add_option("--namespace", c.review_args.namespace_name, "namespace of the dry-run pods (one the webhook selects)")
      ->capture_default_str();
  c.review->add_option("--wait", c.review_wait,
                       "with --through-api-server: ask again until shmguard answers, for this long (e.g. 2m)")
      ->capture_default_str();
  c.review->add_option("--webhook-service", c.review_args.webhook_service,
                       "NAMESPACE/NAME of the webhook's Service, named in the message when no answer comes");
}

void add_observe_fn_version(CLI::App& app, Commands& c) {
  c.observe = app.add_subcommand("observe", "Run a command and measure the /dev/shm it uses; say how to annotate it");
  c.observe->add_option("--shm-size", c.observe_args.shm_size, "run in a private tmpfs of this size at /dev/shm (root)")
      ->type_name("QUANTITY");
  c.observe->add_option("--interval-ms", c.observe_args.interval_ms, "sampling interval: shorter catches shorter peaks")
      ->capture_default_str();
  c.observe->add_option("-o,--output", c.observe_args.output, "text or json")->check(CLI::IsMember({"text", "json"}));
  c.observe->add_option("--report", c.observe_args.report_file,
                      "write the report to this file; - for stdout, which then gets no command output (it goes to stderr)");
  c.observe->add_option("--batch-size", c.observe_args.batch, "the job's batch size: infer the sample size")->type_name("UINT");
  c.observe->add_option("--num-workers", c.observe_args.workers, "the job's DataLoader num_workers")->type_name("UINT");
  c.observe->add_option("--prefetch-factor", c.observe_args.prefetch, "the job's prefetch_factor (default from config)")->type_name("UINT");
  c.observe->add_option("--procs-per-pod", c.observe_args.procs, "processes with their own DataLoader")->type_name("UINT");
  c.observe->add_option("--config", c.observe_args.config_file, "YAML config file (headroom, min)");
  c.observe->add_option("command", c.observe_args.command, "the command to run, after --")->required();
  c.top = app.add_subcommand("top", "How full each running pod's /dev/shm is (the kubelets' Summary API through the API server)");
  c.top->add_option("--kubeconfig", c.top_args.kubeconfig, "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)");
  c.top->add_option("--context", c.top_args.context, "kubeconfig context (default: its current-context)");
  auto* ns = c.top->add_option("-n,--namespace", c.top_args.namespace_name, "namespace (default: default)");
  c.top->add_flag("-A,--all-namespaces", c.top_args.all_namespaces, "every namespace")->excludes(ns);
  c.top->add_option("-l,--selector", c.top_args.selector, "label selector, as kubectl's");
  c.top->add_option("--watch", c.top_args.watch, "sample for this long (e.g. 5m) and show each pod's peak");
  c.top->add_option("--interval", c.top_args.interval_s, "seconds between samples with --watch")->capture_default_str();
  c.top->add_option("-o,--output", c.top_args.output, "table or json")->check(CLI::IsMember({"table", "json"}));
  c.top->add_option("--request-timeout", c.top_args.timeout_s, "seconds per request to the API server")->capture_default_str();
  c.top->add_option("--config", c.top_config, "YAML config file (headroom and min, for the suggestion)");
  c.monitor = app.add_subcommand("monitor", "Scrape every kubelet's /dev/shm use on a period; serve Prometheus metrics; warn at 90% with an Event");
  c.monitor->add_option("--kubeconfig", c.monitor_args.kubeconfig, "kubeconfig file (default: in-cluster)");
  c.monitor->add_option("--context", c.monitor_args.context, "kubeconfig context");
  c.monitor->add_option("--listen", c.monitor_args.listen, "HOST:PORT for /metrics and /healthz")->capture_default_str();
  c.monitor->add_option("--period", c.monitor_args.period_s, "seconds between scrape cycles")->capture_default_str();
  c.monitor->add_option("--kubelet-timeout", c.monitor_args.timeout_s, "seconds per kubelet (and API request)")->capture_default_str();
  c.monitor->add_option("--parallel", c.monitor_args.parallel, "kubelets read at once")->capture_default_str();
  c.monitor->add_option("--kubelet-ca", c.monitor_args.kubelet_ca, "PEM CA of the kubelets' serving certificates (default: the API server's CA)")->check(CLI::ExistingFile);
  c.monitor->add_flag("--kubelet-insecure-tls", c.monitor_args.kubelet_insecure_tls, "do not verify the kubelets' serving certificates");
  c.monitor->add_flag("!--no-events", c.monitor_args.events, "do not write the 90% Event");
  c.monitor->add_option("--cycles", c.monitor_args.cycles, "stop after this many cycles (0: until SIGTERM)")->capture_default_str();
  c.monitor->add_option("--config", c.monitor_config, "YAML config file (headroom and min, for the suggestion)");
  auto* check = c.monitor->add_option("--check", c.monitor_check.url,
                                      "instead of monitoring: ask the monitor at http://HOST:PORT until it has done a cycle "
                                      "(what `helm test` runs)");
  c.monitor->add_option("--expect-pod", c.monitor_check.expect_pod,
                        "with --check: also until it reports this pod's /dev/shm (NAMESPACE/NAME)")->needs(check);
  c.monitor->add_option("--check-timeout", c.monitor_check.timeout_s, "with --check: seconds to keep asking")
      ->needs(check)->capture_default_str();
  c.fn = app.add_subcommand("fn", "KRM function: a ResourceList on stdin, injected items and results on stdout");
  c.fn->add_option("--config", c.fn_config, "YAML config file");
  c.version = app.add_subcommand("version", "Print the version");
}

int review(Commands& c) {
  ReviewArgs& a = c.review_args;
  if (a.files.empty() && !a.test_pod) return fail("review: give -f FILE or --test-pod");
  auto wait = parse_duration_s(c.review_wait);
  if (!wait) return fail("review: --wait: \"" + printable(c.review_wait) + "\" is not a duration (90s, 2m, 1h30m)");
  a.wait_s = *wait;
  if (!a.through_api_server) {
    if (a.wait_s != 0) return fail("review: --wait needs --through-api-server");
    if (a.server.empty() || a.ca_file.empty()) return fail("review: give --server and --ca (or --through-api-server)");
  }
  auto files = expand_inputs(a.files);
  if (!files) return fail(files.error());
  a.files = std::move(*files);
  return a.through_api_server ? run_review_through_api_server(a) : run_review(a);
}

int dispatch(Commands& c) {
  if (*c.version) {
    std::cout << "shmguard " << SHMGUARD_VERSION << "\n";
    return kExitOk;
  }
  if (*c.size) return run_size(c.size_args);
  if (*c.observe) return run_observe(c.observe_args);
  if (*c.top) {
    auto cfg = load_config(c.top_config);
    if (!cfg) return fail(cfg.error());
    return run_top(c.top_args, *cfg);
  }
  if (*c.monitor && !c.monitor_check.url.empty()) return run_monitor_check(c.monitor_check);
  if (*c.monitor) {
    auto cfg = load_config(c.monitor_config);
    if (!cfg) return fail(cfg.error());
    return run_monitor(c.monitor_args, *cfg);
  }
  if (*c.review) return review(c);
  if (*c.fn) {
    auto cfg = load_config(c.fn_config);
    if (!cfg) return fail(cfg.error());
    return run_krm_function(std::cin, std::cout, std::cerr, *cfg);
  }
  if (*c.mutate) return run_mutate(c.mutate_args);
  if (*c.check) return run_check(c.check_args);
  if (*c.serve) return run_serve(c.serve_opts, c.log_level);
  return kExitBadInput;
}

}  // namespace

int run(int argc, char** argv) {
  // Installed as kubectl-shmguard, the same binary is a kubectl plugin: `kubectl shmguard check`.
  const std::string self = argc > 0 ? fs::path(argv[0]).filename().string() : "shmguard";
  CLI::App app{"shmguard: sizes /dev/shm for PyTorch training pods (admission webhook and offline checker)",
               self == "kubectl-shmguard" ? "kubectl shmguard" : "shmguard"};
  app.require_subcommand(1);
  app.set_version_flag("--version", SHMGUARD_VERSION);
  app.footer(inject::annotation_help() + "\n" + inject::recognition_help(config::SelectionConfig{}));
  Commands c;
  add_serve(app, c);
  add_mutate_and_check(app, c);
  add_size_and_review(app, c);
  add_observe_fn_version(app, c);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitBadInput;
  }
  try {
    return dispatch(c);
  } catch (const std::exception& e) {
    return fail(std::string("unexpected error: ") + e.what());
  }
}

}  // namespace shmguard::cli
