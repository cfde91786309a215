// `shmguard observe`: runs a command, samples how much of /dev/shm it uses (statvfs, relative to
// what was used before it started), and says which annotations cover it: the peak x headroom as
// shmguard.io/size, or, given batch size and workers, the sample size the peak implies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "measure/sampler.h"

namespace shmguard::cli {

struct ObserveArgs {
  std::vector<std::string> command;
  std::string shm_size;   // run in a private tmpfs of this size at /dev/shm (root only)
  int interval_ms = 10;
  std::string output = "text";
  std::string report_file;
  std::string batch, workers, prefetch, procs;  // counts, optional
  std::string config_file;
};

// The sampled run (measure/sampler.h) and what observe concludes from it.
struct ObserveReport : measure::Sampled {
  std::uint64_t baseline = 0;       // bytes used in /dev/shm before the command started
  std::optional<std::uint64_t> shm_total;  // the tmpfs size, when --shm-size made one
  std::uint64_t recommended = 0;    // shmguard.io/size that covers the peak
  std::optional<std::uint64_t> sample_size;  // bytes per sample the peak implies
  std::string yaml;                 // the annotations to paste into a pod template
  std::string no_proposal;          // why no annotations are proposed (a failed run, no /dev/shm use)
};

int run_observe(const ObserveArgs& a);

// The sample size a DataLoader peak implies: each of `procs` processes holds
// (workers x prefetch + 1) batches of `batch` samples at its peak.
std::uint64_t implied_sample_size(std::uint64_t peak, std::uint64_t batch, std::uint64_t workers,
                                  std::uint64_t prefetch, std::uint64_t procs);

}  // namespace shmguard::cli
