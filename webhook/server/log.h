// Structured logs: one JSON object per line on stderr, written atomically.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/log_level.h"

namespace shmguard::server {

using Level = LogLevel;

void set_log_level(Level level);
// "debug", "info", "warn", "error" (kLevelTable, in Level's order); nullopt for anything else.
std::optional<Level> parse_log_level(std::string_view text);
std::string log_level_names();  // "debug, info, warn or error", for --help and errors
bool log_enabled(Level level);

// Writes {"ts":..., "level":..., "msg":..., <fields>} as one line, through LogLine.
void log(Level level, std::string_view msg, const nlohmann::json& fields = nlohmann::json::object());

// The one writer of log lines, built field by field without a JSON tree (the per-admission hot
// path uses it directly). Strings lose trailing white space (library error texts end in a
// newline), and a byte that is not valid UTF-8 becomes U+FFFD: every line is valid JSON.
class LogLine {
 public:
  LogLine(Level level, std::string_view msg);
  LogLine& str(std::string_view key, std::string_view value);
  LogLine& num(std::string_view key, double value);
  LogLine& list(std::string_view key, const std::vector<std::string>& values);
  LogLine& json(std::string_view key, const nlohmann::json& value);  // a string as str(), else as JSON
  void emit();

 private:
  std::string text_;
};

}  // namespace shmguard::server
