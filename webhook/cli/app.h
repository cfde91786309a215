// The CLI11 app behind main(): serve, mutate, check, size, review, observe, top, monitor, fn, version.
#pragma once

#include <string>
#include <vector>

namespace shmguard::cli {

int run(int argc, char** argv);

}  // namespace shmguard::cli
