// Text helpers every module uses: reading a file whole, echoing untrusted values, and the glob the
// config's image and file patterns are written in.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace shmguard {

// The whole of a file, as bytes; the failure is "PATH: cannot read: REASON".
Result<std::string> read_file(const std::string& path);

// `text` without the spaces, tabs and line breaks at its end.
std::string_view trim_end(std::string_view text);

// A value safe to echo in a warning: control characters replaced, at most `max` characters.
std::string printable(std::string_view value, std::size_t max = 40);

// ASCII lowercase (label values, booleans, key spellings, HTTP header names: never
// locale-dependent). The one lowercasing in webhook/ (tests/e2e/test_layering.py).
std::string lowercase(std::string_view text);

// A Prometheus label value as the text exposition format writes it between its quotes: backslash,
// double quote and line feed escaped (\\, \", \n), every other byte as it is. The webhook's and the
// monitor's metrics both write their labels with it.
std::string prometheus_label(std::string_view value);

// Shell-style glob: '*' matches any run of characters (including '/'), '?' one character.
bool glob_match(std::string_view pattern, std::string_view text);

// A duration as Helm and kubectl write one, in whole seconds: "90", "90s", "2m", "1h30m", "1m30s".
// nullopt for anything else (empty, a unit other than h/m/s, a fraction, over a day).
std::optional<int> parse_duration_s(std::string_view text);

}  // namespace shmguard
