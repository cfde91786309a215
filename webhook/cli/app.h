// The shmguard subcommands behind main(): serve, mutate, check, fn, review, observe, size, version.
#pragma once

#include <string>
#include <vector>

namespace shmguard::cli {

int run(int argc, char** argv);

}  // namespace shmguard::cli
