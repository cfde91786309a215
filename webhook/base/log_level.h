// How loud a log line is. Here, below the server that writes the lines, because tables in lower
// modules (base/reason.h) say at which level their rows are logged.
#pragma once

namespace shmguard {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kCount };

}  // namespace shmguard
