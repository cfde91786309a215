// Structured logs: one JSON object per line on stderr, written atomically.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace shmguard::server {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_log_level(Level level);
bool parse_log_level(std::string_view text, Level& out);
bool log_enabled(Level level);

// Writes {"ts":..., "level":..., "msg":..., <fields>} as one line.
void log(Level level, std::string_view msg, nlohmann::json fields = nlohmann::json::object());

}  // namespace shmguard::server
