// The quoting rules of new strings in YAML: when a string must be quoted to read back as a string
// (YAML 1.1 as Kubernetes reads it, and 1.2), and its double-quoted, single-quoted and literal
// forms, for the emitters of yaml_emit.cpp.
#include <cctype>

#include "manifests/yaml_internal.h"

namespace shmguard::manifests {

using namespace internal;

namespace internal {

std::string double_quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          static const char* hex = "0123456789abcdef";
          out += "\\x";
          out += hex[u >> 4];
          out += hex[u & 15];
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

bool literal_ok(std::string_view s) {
  if (s.empty() || s.find('\n') == std::string_view::npos) return false;
  if (s[0] == ' ' || s[0] == '\t' || s[0] == '\n') return false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f) return false;
  }
  return true;
}

std::string single_quoted(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

}  // namespace internal

bool needs_quotes(std::string_view s) {
  if (s.empty() || is_null_word(s) || bool_word(s).has_value()) return true;
  if (s.front() == ' ' || s.back() == ' ' || s.back() == ':') return true;
  static constexpr std::string_view kIndicators = "-?:,[]{}#&*!|>'\"%@`.";
  if (kIndicators.find(s.front()) != std::string_view::npos) {
    // "./run.sh" or "-c" are fine plain, but keep the rules simple and safe: quote them
    // only when they could read as something other than a string.
    bool risky = s.front() != '.' && s.front() != '-';
    if (s.front() == '-' && (s.size() == 1 || s[1] == ' ' || std::isdigit(static_cast<unsigned char>(s[1])) || s[1] == '.'))
      risky = true;
    if (s.front() == '.' && (is_special_float(s) || is_float_text(s))) risky = true;
    if (s.rfind("---", 0) == 0) risky = true;
    if (risky) return true;
  }
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return true;
  }
  if (s.find(": ") != std::string_view::npos || s.find(" #") != std::string_view::npos) return true;
  if (s.rfind("<<", 0) == 0) return true;
  if (is_special_float(s) || is_float_text(s)) return true;
  if (!plain_word(s) && !resolve_plain(std::string(s)).is_string()) return true;
  if (std::isdigit(static_cast<unsigned char>(s.front())) || s.front() == '+') {
    // Timestamps and sexagesimal numbers in YAML 1.1.
    if (s.find(':') != std::string_view::npos) return true;
    if (s.size() >= 10 && std::isdigit(static_cast<unsigned char>(s[3])) && s[4] == '-') return true;
  }
  return false;
}

std::string yaml_string(std::string_view s, bool in_flow) {
  if (needs_quotes(s) || literal_ok(s) || (in_flow && s.find_first_of(",[]{}") != std::string_view::npos))
    return double_quoted(s);
  return std::string(s);
}

}  // namespace shmguard::manifests
