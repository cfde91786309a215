// Every subcommand's exit status, from one table (docs/cli.md "Exit status"; each `--help` lists
// its own): what CI scripts and kubectl plugins rely on.
#pragma once

namespace shmguard::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFindings = 1;     // check: a finding named by --fail-on; review: an answer that did not inject
inline constexpr int kExitCannotStart = 1;  // serve: the listeners cannot start (certificate, config, port)
inline constexpr int kExitBadInput = 2;     // unreadable or invalid input, bad flags, a file that cannot be written
// fn follows kpt's function convention: any failure to process the ResourceList is exit 1, the
// reason on stderr (kpt and kustomize report it as the function's error).
inline constexpr int kExitFunctionError = 1;
inline constexpr int kExitCannotRun = 126;  // observe: the command exists but cannot be executed
inline constexpr int kExitNotFound = 127;   // observe: the command does not exist (as a shell says)

}  // namespace shmguard::cli
