// A command run while a shared-memory filesystem is sampled (`shmguard observe`): its stderr passed
// through and watched for PyTorch's bus error, SIGINT and SIGTERM forwarded to it, the highest use
// above a baseline kept with when it happened, and how the command ended.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/shm_path.h"

namespace shmguard::measure {

struct Sampling {
  std::string path = kShmPath;    // the filesystem sampled (private_shm.h used_bytes)
  int interval_ms = 10;           // between samples
  std::uint64_t baseline = 0;     // bytes used before the command started: the peak is above it
  bool stdout_to_stderr = false;  // the command's stdout onto this process's stderr (stdout has a report)
};

struct Sampled {
  std::uint64_t peak = 0;     // highest use above the baseline
  double peak_at_s = 0;       // seconds after the start
  double duration_s = 0;
  std::uint64_t samples = 0;
  int exit_code = 0;          // the command's status (128 + N when signal N killed it)
  int signal = 0;             // the signal that killed the command, if any
  bool bus_error = false;     // SIGBUS, or PyTorch's "DataLoader worker ... Bus error"
};

// Starts `command` (argv, found on PATH) with this process's stdin, environment and working
// directory, and samples until it exits, filling `out`. Returns 0 when it ran, else the errno of
// a command that could not start (ENOENT: it does not exist).
int sample_command(const std::vector<std::string>& command, const Sampling& s, Sampled& out);

// PyTorch's two ways of saying its DataLoader workers ran out of shared memory.
bool says_bus_error(const std::string& text);

}  // namespace shmguard::measure
