// JSON-lines logger (see log.h).
#include "server/log.h"

#include <cctype>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <iterator>
#include <mutex>
#include <string>

#include "base/enum_table.h"

namespace shmguard::server {
namespace {
std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
std::mutex g_mu;

std::string timestamp() {
  using namespace std::chrono;
  auto now = system_clock::now();
  auto secs = system_clock::to_time_t(now);
  auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

// By Level: the one place a level's name is written.
struct LevelRow {
  Level level;
  const char* name;  // the line's "level", --log-level's value
};
constexpr LevelRow kLevelTable[] = {
    {.level = Level::kDebug, .name = "debug"},
    {.level = Level::kInfo, .name = "info"},
    {.level = Level::kWarn, .name = "warn"},
    {.level = Level::kError, .name = "error"},
};
constexpr std::size_t kLevelCount = std::size(kLevelTable);
static_assert(in_enum_order(kLevelTable, &LevelRow::level, static_cast<std::size_t>(Level::kCount)),
              "kLevelTable: one row for every Level, in Level's order");

const char* name(Level l) { return kLevelTable[static_cast<std::size_t>(l)].name; }

void write_line(std::string& text) {
  text += '\n';
  std::lock_guard<std::mutex> lock(g_mu);
  std::size_t off = 0;
  while (off < text.size()) {
    auto n = ::write(STDERR_FILENO, text.data() + off, text.size() - off);
    if (n <= 0) break;
    off += static_cast<std::size_t>(n);
  }
}

// How many bytes the UTF-8 sequence at s[i] has, or 0 when it is not valid UTF-8 (overlong
// forms, surrogates and code points past U+10FFFF included).
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](std::size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if ((c == 0xE0 && b(1) < 0xA0) || (c == 0xED && b(1) > 0x9F)) return 0;
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if ((c == 0xF0 && b(1) < 0x90) || (c == 0xF4 && b(1) > 0x8F)) return 0;
    return 4;
  }
  return 0;
}

// A JSON string: quotes, backslashes and control characters escaped, and each byte that is not
// part of valid UTF-8 replaced by U+FFFD, so that every line parses whatever a client sent.
void append_quoted(std::string& out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    const std::size_t n = utf8_length(s, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\u00";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out.append(s.data() + i, n);
    }
    i += n;
  }
  out += '"';
}

}  // namespace

void set_log_level(Level level) { g_level = static_cast<int>(level); }

std::optional<Level> parse_log_level(std::string_view text) {
  for (const auto& row : kLevelTable)
    if (text == row.name) return row.level;
  return std::nullopt;
}

std::string log_level_names() {
  std::string out;
  for (std::size_t i = 0; i < kLevelCount; ++i)
    out += (i == 0 ? "" : i + 1 == kLevelCount ? " or " : ", ") + std::string(kLevelTable[i].name);
  return out;
}

bool log_enabled(Level level) { return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed); }

LogLine::LogLine(Level level, std::string_view msg) {
  text_.reserve(320);
  text_ += "{\"ts\":\"" + timestamp() + "\",\"level\":\"" + name(level) + "\",\"msg\":";
  append_quoted(text_, msg);
}

LogLine& LogLine::str(std::string_view key, std::string_view value) {
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.remove_suffix(1);
  text_ += ',';
  append_quoted(text_, key);
  text_ += ':';
  append_quoted(text_, value);
  return *this;
}

LogLine& LogLine::num(std::string_view key, double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", value);
  text_ += ',';
  append_quoted(text_, key);
  text_ += ':';
  text_ += buf;
  return *this;
}

LogLine& LogLine::list(std::string_view key, const std::vector<std::string>& values) {
  text_ += ',';
  append_quoted(text_, key);
  text_ += ":[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) text_ += ',';
    append_quoted(text_, values[i]);
  }
  text_ += ']';
  return *this;
}

void LogLine::emit() {
  text_ += '}';
  write_line(text_);
}

LogLine& LogLine::json(std::string_view key, const nlohmann::json& value) {
  if (value.is_string()) return str(key, value.get_ref<const std::string&>());
  text_ += ',';
  append_quoted(text_, key);
  text_ += ':';
  text_ += value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return *this;
}

// The same writer as the admission line: ts, level, msg first, then the fields.
void log(Level level, std::string_view msg, const nlohmann::json& fields) {
  if (!log_enabled(level)) return;
  LogLine line(level, msg);
  if (fields.is_object())
    for (const auto& [k, v] : fields.items()) line.json(k, v);
  line.emit();
}

}  // namespace shmguard::server
