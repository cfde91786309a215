// What the subcommands share (see shared.h).
#include "cli/shared.h"

#include <iostream>
#include <sstream>

#include "inject/annotations.h"
#include "inject/recognize.h"

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

namespace {

constexpr std::size_t kHelpWidth = 100;
constexpr std::size_t kLabelWidth = 9;  // "Output:  "

// `text` after `label`, its words wrapped at kHelpWidth under the first word.
void wrapped(std::ostringstream& os, const std::string& label, const std::string& text) {
  std::istringstream words(text);
  std::string word;
  std::size_t col = 0;
  os << label << std::string(kLabelWidth - label.size(), ' ');
  col = kLabelWidth;
  bool first = true;
  while (words >> word) {
    if (!first && col + 1 + word.size() > kHelpWidth) {
      os << "\n" << std::string(kLabelWidth, ' ');
      col = kLabelWidth;
    } else if (!first) {
      os << ' ';
      ++col;
    }
    os << word;
    col += word.size();
    first = false;
  }
  os << "\n";
}

}  // namespace

void set_usage(CLI::App& command, const Usage& usage) {
  std::ostringstream os;
  wrapped(os, "Input:", usage.input);
  wrapped(os, "Output:", usage.output);
  for (std::size_t i = 0; i < usage.exits.size(); ++i)
    wrapped(os, i == 0 ? "Exit:" : "", std::to_string(usage.exits[i].first) + "  " + usage.exits[i].second);
  os << "\nAnnotations and which pods are training pods: `shmguard --help`, docs/sizing.md.\n"
     << "This command in full: docs/cli.md.";
  command.footer(os.str());
}

std::string main_footer() {
  std::ostringstream os;
  os << inject::annotation_help() << "\n" << inject::recognition_help(config::SelectionConfig{}) << "\n";
  wrapped(os, "Exit:", std::to_string(kExitOk) + " ok; " + std::to_string(kExitFindings) +
                           " findings (check, review, top, monitor --check) or, for fn, any failure; " + std::to_string(kExitBadInput) +
                           " bad input or usage, the file and line on stderr. `shmguard COMMAND --help` says what "
                           "that command reads, prints and exits with.");
  os << "\nThe annotations, the formula and the recognition rules: docs/sizing.md. Every command: docs/cli.md.";
  return os.str();
}

}  // namespace shmguard::cli
