// Merge-conflict markers committed in a manifest (`<<<<<<< HEAD`, `=======`, `>>>>>>> branch`).
// libyaml reads such a line as text and fails a line or more later with a scanner message that
// does not say what it is (or, inside a multi-line quoted string, not at all), so the YAML reader
// looks for markers first and names them at their own line. Header-only: the reader and `check`
// share it, a few lines each.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "base/text.h"

namespace shmguard::manifests {

struct ConflictMarker {
  int line = 0;      // 1-based, within the text searched
  std::string text;  // the marker line as the message prints it (control characters replaced)
};

namespace conflict_internal {
inline constexpr std::string_view kMessageStart = "merge-conflict marker \"";
inline constexpr std::size_t kLength = 7;

inline bool is_marker(std::string_view line) {
  if (line.size() < kLength || (line[0] != '<' && line[0] != '=' && line[0] != '>')) return false;
  if (line.substr(0, kLength).find_first_not_of(line[0]) != std::string_view::npos) return false;
  const std::string_view rest = line.substr(kLength);
  return rest.empty() || rest[0] == ' ' || rest == "\r";  // "\r": a CRLF file's line end
}
}  // namespace conflict_internal

// The first line of `text` that is a marker: seven '<', '=' or '>' at column 0, then a space or
// the end of the line. At column 0 it is never YAML a manifest could mean: a block scalar's content
// is indented, and a key or list item cannot start with '<', '=' or '>'.
inline std::optional<ConflictMarker> find_conflict_marker(std::string_view text) {
  int line = 1;
  for (std::size_t at = 0; at < text.size(); ++line) {
    const std::size_t nl = text.find('\n', at);
    const std::string_view here = text.substr(at, nl == std::string_view::npos ? nl : nl - at);
    if (conflict_internal::is_marker(here)) return ConflictMarker{line, printable(trim_end(here), 80)};
    if (nl == std::string_view::npos) break;
    at = nl + 1;
  }
  return std::nullopt;
}

// `merge-conflict marker "<<<<<<< HEAD" (resolve the conflict first)`.
inline std::string conflict_marker_message(const ConflictMarker& marker) {
  return std::string(conflict_internal::kMessageStart) + marker.text + "\" (resolve the conflict first)";
}

// Whether a "file:line: message" failure is a conflict marker's. `check --skip-invalid` never
// skips one (a committed conflict is a broken manifest, not a file that is no manifest); the
// failure's kind does not travel past the document worker, so the message is what is left.
inline bool is_conflict_marker_error(std::string_view failure) {
  // The message follows the first ":LINE: " (the file's own name may hold ": ").
  for (std::size_t at = failure.find(": "); at != std::string_view::npos; at = failure.find(": ", at + 1)) {
    std::size_t digits = at;
    while (digits > 0 && failure[digits - 1] >= '0' && failure[digits - 1] <= '9') --digits;
    if (digits == at || digits == 0 || failure[digits - 1] != ':') continue;
    return failure.substr(at + 2).starts_with(conflict_internal::kMessageStart);
  }
  return false;
}

}  // namespace shmguard::manifests
