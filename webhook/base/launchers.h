// The PyTorch launchers and trainers shmguard knows, one row each: what recognition looks for in a
// container's command line (selection.commands' default, rule 6 of docs/sizing.md) and, for those
// that start one process per GPU or per what they are told, the flags that give the process
// count (docs/sizing.md "Where procs comes from"). A new launcher is one row here; the config's
// default list, the process count, its pre-check on the admission path, `shmguard --help` and the
// tests all read the table.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace shmguard {

struct LauncherRow {
  std::string_view name;  // as the sizing text names it: "torchrun", "accelerate launch"
  // The command lines that start it, as selection.commands writes them: the program, then words
  // that follow it in order ("python" stands for any python3.x).
  std::vector<std::string_view> commands;
  // For the process count: a word that starts it (a program's basename, or the module python runs,
  // also as -mMODULE), and the flags that say how many processes it starts.
  std::vector<std::string_view> programs = {};  // = {}: a row may leave them out, unwarned
  std::vector<std::string_view> count_flags = {};
  std::vector<std::string_view> divisor_flags = {};  // count per pod = count / this (accelerate's machines)
};

// In the order of selection.commands' default; torchrun first (an image whose entrypoint is
// torchrun runs it without naming it).
const std::vector<LauncherRow>& launcher_table();

// Every row's commands, in table order: selection.commands' default.
std::vector<std::string> default_launcher_commands();

}  // namespace shmguard
