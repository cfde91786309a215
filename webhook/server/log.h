// Structured logs: one JSON object per line on stderr, written atomically.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace shmguard::server {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_log_level(Level level);
bool parse_log_level(std::string_view text, Level& out);
bool log_enabled(Level level);

// Writes {"ts":..., "level":..., "msg":..., <fields>} as one line.
void log(Level level, std::string_view msg, nlohmann::json fields = nlohmann::json::object());

// The same line format built field by field, without a JSON tree: the per-admission hot path.
class LogLine {
 public:
  LogLine(Level level, std::string_view msg);
  LogLine& str(std::string_view key, std::string_view value);
  LogLine& num(std::string_view key, double value);
  LogLine& list(std::string_view key, const std::vector<std::string>& values);
  void emit();

 private:
  std::string text_;
};

}  // namespace shmguard::server
