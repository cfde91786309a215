// `shmguard size`: the /dev/shm size for DataLoader parameters, and the arithmetic behind it.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/shared.h"
#include "cli/flags.h"
#include "cli/report.h"
#include "sizing/formula.h"
#include "sizing/quantity.h"

namespace shmguard::cli {
namespace {

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

}  // namespace

void add_size(CLI::App& app, Outcome& out) {
  auto a = std::make_shared<SizeArgs>();
  auto* c = app.add_subcommand("size", "Compute the /dev/shm size for DataLoader parameters");
  set_usage(*c, {.input = "the flags below (a count or a Kubernetes quantity each); --config for the formula's "
                         "defaults (headroom, base, min, max, prefetch factor)",
                .output = "-o text (default): the size on the first line, then the arithmetic; warnings on stderr. "
                          "-o json: sizeLimit, bytes, needBytes, explanation, procs, exceedsMemoryLimit, warnings",
                .exits = {{kExitOk, "the size was computed (also when a warning was given)"},
                          {kExitBadInput, "bad flags or config"}}});
  c->add_option("--batch-size", a->batch, "samples per batch, per process")->required()->type_name("UINT");
  c->add_option("--num-workers", a->workers, "DataLoader num_workers, per process")->required()->type_name("UINT");
  c->add_option("--sample-size", a->sample, "bytes per sample (a quantity, e.g. 588Ki)")->required()->type_name("QUANTITY");
  c->add_option("--prefetch-factor", a->prefetch, "DataLoader prefetch_factor (default from config)")->type_name("UINT");
  c->add_option("--procs-per-pod", a->procs, "processes with their own DataLoader")->type_name("UINT");
  c->add_option("--memory-limit", a->memory_limit, "the pod's memory limit (warns when exceeded)")->type_name("QUANTITY");
  c->add_option("-o,--output", a->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  c->add_option("--config", a->config_file, "YAML config file");
  c->callback([a, &out] { out.code = run_size(*a); });
}

}  // namespace shmguard::cli
