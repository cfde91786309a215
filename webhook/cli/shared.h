// What every subcommand's file shares (app.cpp adds them to the app): one way to report
// a failure, one way to read the config file, and how a subcommand registers itself. Each
// `add_<command>(app, outcome)` adds its flags and a CLI11 callback that runs it and leaves its
// exit code (exit_codes.h) in `outcome`.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "cli/exit_codes.h"
#include "config/config.h"

namespace shmguard::cli {

struct Outcome {
  int code = kExitOk;
};

// "shmguard: MSG" (or "shmguard COMMAND: MSG") on stderr; returns `code`.
int fail(const std::string& msg, int code = kExitBadInput);
int fail(const char* command, const std::string& msg, int code = kExitBadInput);

// The config file, or the defaults when none is given.
Result<config::Config> load_config(const std::string& path);

// What a subcommand needs and gives, for the end of `shmguard COMMAND --help`: its input formats,
// its output formats, and each exit status (from exit_codes.h) with when it happens. The
// annotations are not repeated there: the help points at `shmguard --help` and docs/sizing.md.
struct Usage {
  std::string input;
  std::string output;
  std::vector<std::pair<int, std::string>> exits;  // {code, when}
};
void set_usage(CLI::App& command, const Usage& usage);

// The footer of `shmguard --help`: the annotations table, the recognition rules' defaults, the
// exit statuses every command shares and where each command is described.
std::string main_footer();

// One per subcommand, each in <name>_command.cpp (serve_command.cpp, ..., fn_command.cpp).
void add_serve(CLI::App& app, Outcome& out);
void add_mutate(CLI::App& app, Outcome& out);
void add_check(CLI::App& app, Outcome& out);
void add_size(CLI::App& app, Outcome& out);
void add_review(CLI::App& app, Outcome& out);
void add_observe(CLI::App& app, Outcome& out);
void add_top(CLI::App& app, Outcome& out);
void add_monitor(CLI::App& app, Outcome& out);
void add_fn(CLI::App& app, Outcome& out);

}  // namespace shmguard::cli
