// What the subcommands share (see command.h).
#include "cli/command.h"

#include <iostream>

namespace shmguard::cli {

int fail(const std::string& msg, int code) {
  std::cerr << "shmguard: " << msg << "\n";
  return code;
}

int fail(const char* command, const std::string& msg, int code) {
  std::cerr << "shmguard " << command << ": " << msg << "\n";
  return code;
}

Result<config::Config> load_config(const std::string& path) {
  if (path.empty()) return config::Config{};
  return config::load_config_file(path);
}

}  // namespace shmguard::cli
