// The manifests `mutate` and `check` read: their shared flags, the files the -f arguments name
// (directories walked, --exclude applied), and the one way a file (or stdin) is opened and fed to
// the offline runner.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "cli/report.h"
#include "manifests/offline.h"

namespace shmguard::cli {

struct ManifestArgs {
  std::vector<std::string> files;
  std::vector<std::string> excludes;
  std::vector<std::string> observed;  // --observed: top -o json output or the monitor's metrics
  std::string output;
  std::string config_file;
  std::string fail_on = default_fail_on();
  bool in_place = false;
  bool skip_invalid = false;
  bool allow_reformat = false;
  unsigned jobs = 0;  // threads working on documents; 0: one per core
};

// The flags mutate and check share: --observed (with the command's own help), --exclude, --config,
// -j. A repeatable flag takes one value each time it is given, so the inputs may follow it.
void add_input_flags(CLI::App& command, ManifestArgs& a, const std::string& observed_help);

// The runner's threads from --jobs (0: one per core).
unsigned runner_threads(const ManifestArgs& a);

// The files to read: -f arguments expanded (files_named), --exclude globs applied; an error when none is left.
Result<std::vector<std::string>> input_files(const ManifestArgs& a);

// Opens `f` ("-": stdin) and gives it to the runner; the error names the file.
Status open_input(manifests::OfflineRunner& runner, const std::string& f);

}  // namespace shmguard::cli
