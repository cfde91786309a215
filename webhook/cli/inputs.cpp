// Manifest inputs of mutate and check (see inputs.h).
#include "cli/inputs.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "base/parallel.h"
#include "base/text.h"
#include "cli/files.h"
#include "cli/report.h"

namespace shmguard::cli {
namespace fs = std::filesystem;
namespace {

bool excluded(const std::string& path, const std::vector<std::string>& globs) {
  const std::string base = fs::path(path).filename().string();
  return std::any_of(globs.begin(), globs.end(), [&](const std::string& g) {
    return glob_match(g, path) || glob_match(g, base);
  });
}

}  // namespace

Result<std::vector<std::string>> input_files(const ManifestArgs& a) {
  auto all = expand_inputs(a.files);
  if (!all) return all;
  std::vector<std::string> files;
  for (auto& f : *all)
    if (f == "-" || !excluded(f, a.excludes)) files.push_back(std::move(f));
  if (files.empty()) return Failure{"no input files found in " + a.files.front()};
  return files;
}

void add_input_flags(CLI::App& c, ManifestArgs& a) {
  c.add_option("--exclude", a.excludes, "skip files whose path or name matches this glob (repeatable)");
  c.add_option("--config", a.config_file, "YAML config file");
  c.add_option("-j,--jobs", a.jobs, "threads working on documents (0: one per core); output is the same for any")
      ->capture_default_str();
}

unsigned runner_threads(const ManifestArgs& a) { return a.jobs ? a.jobs : default_threads(); }

Status open_input(manifests::OfflineRunner& runner, const std::string& f) {
  if (f == "-") return runner.process("<stdin>", std::cin);
  std::ifstream in(f, std::ios::binary);
  if (!in) return Failure{f + ": cannot open: " + std::strerror(errno)};
  return runner.process(f, in);
}

}  // namespace shmguard::cli
