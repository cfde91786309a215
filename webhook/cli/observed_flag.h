// `--observed FILE` of `check` and `mutate`: what the cluster saw of each owner's /dev/shm
// (manifests/observed.h), read once, and turned into check's finding or mutate's edit.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "cli/report.h"
#include "manifests/document.h"
#include "manifests/observed.h"

namespace shmguard::cli {

// Every FILE, each `shmguard top -o json` output or the monitor's /metrics text; a failure names
// the file and line.
Result<manifests::Observed> load_observed(const std::vector<std::string>& files);

// What the figures say of the template's report: none when its owner has none or the template no
// size. Its finding (outgrown, wasteful) and JSON go on `rec`.
std::optional<manifests::OwnerSeen> apply_observed(const manifests::Observed& seen, const manifests::TemplateReport& rep,
                                                   const sizing::Params& params, Record& rec);

// `mutate --observed`: the report's result replaced by the edit that writes the size its owner's
// peak needs, for a template the figures find outgrown or wasteful; every other edit of the
// engine's left out (the report says why). Safe to call from the runner's threads.
void retouch_observed(const manifests::Observed& seen, const config::Config& cfg, manifests::TemplateReport& rep,
                      const nlohmann::json& tmpl);

}  // namespace shmguard::cli
