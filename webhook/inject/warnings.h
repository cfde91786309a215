// What the engine tells the user beside its decision: each warning's text, the annotation it is
// about and, offline, its line. Recognition, the annotation reader and the sizing add to one list.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace shmguard::inject {

// A warning for the user: what it says, the annotation it is about ("" for none) and, offline, the
// line it points at (0 until the offline runner places it: the annotation's, else the template's).
struct Warning {
  std::string text;
  std::string about;
  int line = 0;
};

// The engine's warnings, in the order they were found; every output reads this one list.
struct Warnings {
  std::vector<Warning> warnings;
  void warn(std::string text, std::string_view about = {}) { warnings.push_back({std::move(text), std::string(about)}); }
};

}  // namespace shmguard::inject
