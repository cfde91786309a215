// Command-line parsing and the subcommands (see commands.h). Flags -> options -> the engine.
#include "cli/commands.h"

#include <signal.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "manifests/offline.h"
#include "server/log.h"
#include "server/server.h"
#include "sizing/formula.h"
#include "sizing/quantity.h"
#include "version.h"

namespace shmguard::cli {
namespace fs = std::filesystem;
namespace {

constexpr int kExitOk = 0;
constexpr int kExitMissing = 1;
constexpr int kExitBadInput = 2;

int fail(const std::string& msg, int code = kExitBadInput) {
  std::cerr << "shmguard: " << msg << "\n";
  return code;
}

bool load_config(const std::string& path, config::Config& out, std::string& err) {
  if (path.empty()) return true;
  auto r = config::load_config_file(path);
  if (!r.ok) {
    err = r.error;
    return false;
  }
  out = std::move(r.config);
  return true;
}

// ---- size ----
struct SizeArgs {
  std::string batch, workers, sample, prefetch, procs, memory_limit, output = "text", config_file;
};

bool positive(const std::string& flag, const std::string& text, bool allow_zero, std::uint64_t& out, std::string& err) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos) {
    err = flag + ": expected a whole number, got \"" + text + "\"";
    return false;
  }
  out = std::stoull(text);
  if (out == 0 && !allow_zero) {
    err = flag + ": must be at least 1";
    return false;
  }
  return true;
}

bool quantity(const std::string& flag, const std::string& text, std::uint64_t& out, std::string& err) {
  auto q = sizing::parse_quantity(text);
  if (!q.ok) {
    err = flag + ": invalid quantity \"" + text + "\": " + q.error;
    return false;
  }
  if (q.negative || q.bytes == 0) {
    err = flag + ": must be positive";
    return false;
  }
  out = q.bytes;
  return true;
}

int run_size(const SizeArgs& a) {
  config::Config cfg;
  std::string err;
  if (!load_config(a.config_file, cfg, err)) return fail(err);
  sizing::SizingInput in;
  std::uint64_t v = 0;
  if (!positive("--batch-size", a.batch, false, v, err)) return fail(err);
  in.batch_size = v;
  if (!positive("--num-workers", a.workers, true, v, err)) return fail(err);
  in.num_workers = v;
  if (!quantity("--sample-size", a.sample, v, err)) return fail(err);
  in.sample_size = v;
  if (!a.prefetch.empty()) {
    if (!positive("--prefetch-factor", a.prefetch, false, v, err)) return fail(err);
    in.prefetch_factor = v;
  }
  if (!a.procs.empty()) {
    if (!positive("--procs-per-pod", a.procs, false, v, err)) return fail(err);
    in.procs = v;
  }
  if (!a.memory_limit.empty()) {
    if (!quantity("--memory-limit", a.memory_limit, v, err)) return fail(err);
    in.memory_limit = v;
  }
  auto r = sizing::compute_size(in, cfg.sizing);
  if (a.output == "json") {
    nlohmann::json j = {{"sizeLimit", sizing::format_quantity(r.bytes)},
                        {"bytes", r.bytes},
                        {"needBytes", r.need},
                        {"explanation", r.explanation},
                        {"exceedsMemoryLimit", r.exceeds_memory_limit},
                        {"warnings", r.warnings}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << sizing::format_quantity(r.bytes) << "\n" << r.explanation << "\n";
    for (const auto& w : r.warnings) std::cout << "warning: " << w << "\n";
  }
  return kExitOk;
}

// ---- mutate / check ----
struct ManifestArgs {
  std::vector<std::string> files;
  std::string output = "yaml";
  std::string config_file;
};

void print_report(std::ostream& os, const manifests::TemplateReport& r, bool mutate_wording) {
  os << r.file << ":" << r.line << " " << (r.kind.empty() ? "?" : r.kind) << "/"
     << (r.name.empty() ? "?" : r.name) << " " << r.path << " -> " << r.decision_text(mutate_wording);
  if (!r.rewritten.empty()) os << " (document re-emitted: " << r.rewritten << ")";
  os << "\n";
  for (const auto& w : r.result.warnings) os << "    warning: " << w << "\n";
}

int run_manifests(const ManifestArgs& a, bool check) {
  config::Config cfg;
  std::string err;
  if (!load_config(a.config_file, cfg, err)) return fail(err);
  std::vector<std::string> files;
  if (!expand_inputs(a.files, files, err)) return fail(err);
  if (files.empty()) return fail("no input files found in " + a.files.front());

  manifests::OutputFormat fmt = manifests::OutputFormat::kNone;
  if (!check) fmt = a.output == "json" ? manifests::OutputFormat::kJson : manifests::OutputFormat::kYaml;
  // Output goes to an unlinked temporary file first: memory follows the largest document, and
  // nothing reaches stdout unless every input was valid.
  std::FILE* tmp = std::tmpfile();
  if (!tmp) return fail("cannot create a temporary file");
  struct Closer {
    std::FILE* f;
    ~Closer() { std::fclose(f); }
  } closer{tmp};
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
  } filebuf(tmp);
  std::ostream out(&filebuf);
  manifests::OfflineRunner runner(cfg, fmt, out);

  // The report streams too: to stderr for mutate, to a second temporary file for check (whose
  // stdout must stay empty when an input turns out to be invalid).
  std::FILE* report_tmp = check ? std::tmpfile() : nullptr;
  if (check && !report_tmp) return fail("cannot create a temporary file");
  struct ReportCloser {
    std::FILE* f;
    ~ReportCloser() {
      if (f) std::fclose(f);
    }
  } report_closer{report_tmp};
  std::size_t templates = 0, missing = 0;
  const bool json_report = check && a.output == "json";
  runner.set_report_sink([&](const manifests::TemplateReport& r) {
    ++templates;
    if (r.missing_shm()) ++missing;
    std::ostringstream line;
    if (json_report) {
      line << (templates == 1 ? "[\n" : ",\n") << r.to_json().dump(2);
    } else {
      print_report(line, r, !check);
    }
    const std::string text = line.str();
    if (check) {
      std::fwrite(text.data(), 1, text.size(), report_tmp);
    } else {
      std::cerr << text;
    }
  });
  for (const auto& f : files) {
    bool ok;
    if (f == "-") {
      ok = runner.process("<stdin>", std::cin, err);
    } else {
      std::ifstream in(f, std::ios::binary);
      if (!in) return fail(f + ": cannot open");
      ok = runner.process(f, in, err);
    }
    if (!ok) return fail(err);
  }
  runner.finish();
  out.flush();

  auto copy_to_stdout = [](std::FILE* from) {
    std::fflush(from);
    std::rewind(from);
    char buf[1 << 16];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, from)) > 0) std::fwrite(buf, 1, n, stdout);
    std::fflush(stdout);
  };
  if (check) {
    copy_to_stdout(report_tmp);
    if (json_report) {
      std::cout << (templates == 0 ? "[]\n" : "\n]\n");
    } else {
      std::cout << templates << " pod templates, " << missing << (missing == 1 ? " needs" : " need")
                << " /dev/shm\n";
    }
    return missing ? kExitMissing : kExitOk;
  }
  copy_to_stdout(tmp);
  return kExitOk;
}

// ---- serve ----
int run_serve(server::ServeOptions opts, const std::string& log_level, double shutdown_delay) {
  server::Level lvl;
  if (!server::parse_log_level(log_level, lvl)) return fail("--log-level must be debug, info, warn or error");
  server::set_log_level(lvl);
  opts.shutdown_delay_ms = static_cast<int>(shutdown_delay * 1000);
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
  std::string err;
  if (!srv.start(err)) {
    server::log(server::Level::kError, "cannot start", {{"error", err}});
    return fail(err, 1);
  }
  int sig = 0;
  sigwait(&set, &sig);
  server::log(server::Level::kInfo, "signal received", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
  srv.shutdown();
  srv.wait();
  return kExitOk;
}

}  // namespace

bool expand_inputs(const std::vector<std::string>& args, std::vector<std::string>& files, std::string& err) {
  for (const auto& a : args) {
    if (a == "-") {
      files.push_back(a);
      continue;
    }
    std::error_code ec;
    auto st = fs::status(a, ec);
    if (ec || !fs::exists(st)) {
      err = a + ": no such file or directory";
      return false;
    }
    if (fs::is_directory(st)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(a, fs::directory_options::skip_permission_denied, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (!it->is_regular_file()) continue;
        auto ext = it->path().extension().string();
        if (ext == ".yaml" || ext == ".yml" || ext == ".json") found.push_back(it->path().string());
      }
      if (ec) {
        err = a + ": " + ec.message();
        return false;
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(a);
    }
  }
  return true;
}

int run(int argc, char** argv) {
  CLI::App app{"shmguard: sizes /dev/shm for PyTorch training pods (admission webhook and offline checker)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", SHMGUARD_VERSION);

  server::ServeOptions so;
  std::string log_level = "info";
  double shutdown_delay = 1.0;
  auto* serve = app.add_subcommand("serve", "Run the admission webhook (HTTPS) and the metrics listener");
  serve->add_option("--tls-cert-file", so.cert_file, "PEM serving certificate (chain)")->required();
  serve->add_option("--tls-private-key-file", so.key_file, "PEM private key")->required();
  serve->add_option("--config", so.config_file, "YAML config file (re-read on change)");
  serve->add_option("--port", so.port, "HTTPS port for /mutate, /healthz, /readyz (0: any)")->capture_default_str();
  serve->add_option("--metrics-port", so.metrics_port, "plain HTTP port for /metrics, /healthz, /readyz (-1: off)")
      ->capture_default_str();
  serve->add_option("--bind-address", so.bind_address, "address to listen on")->capture_default_str();
  serve->add_option("--tls-min-version", so.tls_min_version, "1.2 or 1.3")->capture_default_str();
  serve->add_option("--log-level", log_level, "debug, info, warn or error")->capture_default_str();
  serve->add_option("--threads", so.threads, "event-loop threads (0: one per core)")->capture_default_str();
  serve->add_option("--shutdown-delay", shutdown_delay, "seconds to keep serving after SIGTERM with readiness false")
      ->capture_default_str();
  serve->add_option("--reload-interval-ms", so.reload_interval_ms, "how often certificate and config files are checked")
      ->capture_default_str();
  serve->add_option("--request-timeout-ms", so.request_timeout_ms, "deadline for the TLS handshake and a whole request")
      ->capture_default_str();

  ManifestArgs ma, ca;
  auto* mutate = app.add_subcommand("mutate", "Print manifests with /dev/shm injected into training pod templates");
  mutate->add_option("-f,--filename", ma.files, "file, directory or - for stdin (repeatable)")->required();
  mutate->add_option("-o,--output", ma.output, "yaml or json")->check(CLI::IsMember({"yaml", "json"}));
  mutate->add_option("--config", ma.config_file, "YAML config file");
  auto* check = app.add_subcommand("check", "Exit 1 if a training pod template lacks the /dev/shm it needs");
  check->add_option("-f,--filename", ca.files, "file, directory or - for stdin (repeatable)")->required();
  check->add_option("-o,--output", ca.output, "text or json")->check(CLI::IsMember({"text", "json", "yaml"}));
  check->add_option("--config", ca.config_file, "YAML config file");

  SizeArgs sa;
  auto* size = app.add_subcommand("size", "Compute the /dev/shm size for DataLoader parameters");
  size->add_option("--batch-size", sa.batch, "samples per batch, per process")->required();
  size->add_option("--num-workers", sa.workers, "DataLoader num_workers, per process")->required();
  size->add_option("--sample-size", sa.sample, "bytes per sample (a quantity, e.g. 588Ki)")->required();
  size->add_option("--prefetch-factor", sa.prefetch, "DataLoader prefetch_factor (default from config)");
  size->add_option("--procs-per-pod", sa.procs, "processes with their own DataLoader");
  size->add_option("--memory-limit", sa.memory_limit, "the pod's memory limit (warns when exceeded)");
  size->add_option("-o,--output", sa.output, "text or json")->check(CLI::IsMember({"text", "json"}));
  size->add_option("--config", sa.config_file, "YAML config file");

  auto* version = app.add_subcommand("version", "Print the version");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitBadInput;
  }
  try {
    if (*version) {
      std::cout << "shmguard " << SHMGUARD_VERSION << "\n";
      return kExitOk;
    }
    if (*size) return run_size(sa);
    if (*mutate) return run_manifests(ma, false);
    if (*check) return run_manifests(ca, true);
    if (*serve) return run_serve(so, log_level, shutdown_delay);
  } catch (const std::exception& e) {
    return fail(std::string("unexpected error: ") + e.what());
  }
  return kExitBadInput;
}

}  // namespace shmguard::cli
