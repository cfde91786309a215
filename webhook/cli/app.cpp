// The command line behind main(): one CLI11 app, one subcommand per file (<name>_command.cpp;
// shared.h lists them), each running from its own callback and leaving its exit code.
#include "cli/app.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "cli/shared.h"
#include "version.h"

namespace shmguard::cli {

int run(int argc, char** argv) {
  // Installed as kubectl-shmguard, the same binary is a kubectl plugin: `kubectl shmguard check`.
  const std::string self = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "shmguard";
  CLI::App app{"shmguard: sizes /dev/shm for PyTorch training pods (admission webhook and offline checker)",
               self == "kubectl-shmguard" ? "kubectl shmguard" : "shmguard"};
  app.require_subcommand(1);
  app.set_version_flag("--version", SHMGUARD_VERSION);
  Outcome out;
  for (auto add : {add_serve, add_mutate, add_check, add_size, add_review, add_observe, add_top, add_monitor, add_fn})
    add(app, out);
  app.add_subcommand("version", "Print the version")->callback([] { std::cout << "shmguard " << SHMGUARD_VERSION << "\n"; });
  // After the subcommands: CLI11 copies a footer into each subcommand made after it is set, and each
  // has its own (set_usage), which points here for the annotations instead of repeating them.
  app.footer(main_footer());
  try {
    app.parse(argc, argv);  // the chosen subcommand runs here, from its callback
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitBadInput;
  } catch (const std::exception& e) {
    return fail(std::string("unexpected error: ") + e.what());
  }
  return out.code;
}

}  // namespace shmguard::cli
