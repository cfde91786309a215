// The shmguard subcommands behind main(): serve, mutate, check, size, version.
#pragma once

#include <string>
#include <vector>

namespace shmguard::cli {

int run(int argc, char** argv);

// Expands -f arguments: files as given, directories recursively (.yaml/.yml/.json, sorted),
// "-" for stdin. Returns false with `err` for a path that does not exist.
bool expand_inputs(const std::vector<std::string>& args, std::vector<std::string>& files, std::string& err);

}  // namespace shmguard::cli
