// Manifest inputs of mutate and check (see inputs.h).
#include "cli/inputs.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string_view>
#include <vector>

#include "base/parallel.h"
#include "base/text.h"
#include "files/walk.h"
#include "cli/report.h"

namespace shmguard::cli {
namespace {

// An --exclude pattern as .gitignore reads one: without a slash it names a file or directory at
// any depth; with one it is a path below the -f directory (or the path as given). A "./" never
// matters, and a final "/" matches directories only.
struct ExcludeGlob {
  std::string pattern;
  bool anchored = false;
  bool directories_only = false;
};

std::string_view without_dot_slash(std::string_view p) {
  while (p.starts_with("./")) {
    const std::size_t rest = p.find_first_not_of('/', 1);  // ".//x" too
    p = rest == std::string_view::npos ? std::string_view() : p.substr(rest);
  }
  return p == "." ? std::string_view() : p;
}

ExcludeGlob parse_exclude(std::string_view g) {
  ExcludeGlob e;
  g = without_dot_slash(g);
  while (g.size() > 1 && g.ends_with('/')) {
    g.remove_suffix(1);
    e.directories_only = true;
  }
  e.anchored = g.find('/') != std::string_view::npos;
  e.pattern = g;
  return e;
}

// The pattern's pieces; "**/" is one, matching nothing or any run of whole directories.
enum class Piece { kChar, kOne, kStar, kGlobstar, kGlobstarSlash };

// '*' and '?' stay within one name, '**' crosses '/', as in .gitignore. Every (piece, position)
// pair is tried once, so no pattern takes exponential time.
bool path_glob(std::string_view pattern, std::string_view text) {
  std::vector<std::pair<Piece, char>> ps;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern.compare(i, 3, "**/") == 0) ps.emplace_back(Piece::kGlobstarSlash, '/'), i += 2;
    else if (pattern.compare(i, 2, "**") == 0) ps.emplace_back(Piece::kGlobstar, '*'), ++i;
    else if (pattern[i] == '*') ps.emplace_back(Piece::kStar, '*');
    else if (pattern[i] == '?') ps.emplace_back(Piece::kOne, '?');
    else ps.emplace_back(Piece::kChar, pattern[i]);
  }
  const std::size_t n = text.size();
  std::vector<char> next(n + 1, 0), row(n + 1, 0);  // next[j]: the pieces after this one match text[j..]
  next[n] = 1;
  for (std::size_t i = ps.size(); i-- > 0;) {
    const auto [piece, c] = ps[i];
    bool through_slash = false;  // kGlobstarSlash: some "X/" starting here leaves a match
    for (std::size_t j = n + 1; j-- > 0;) {
      const bool more = j < n;
      switch (piece) {
        case Piece::kChar: row[j] = more && text[j] == c && next[j + 1]; break;
        case Piece::kOne: row[j] = more && text[j] != '/' && next[j + 1]; break;
        case Piece::kStar: row[j] = next[j] || (more && text[j] != '/' && row[j + 1]); break;
        case Piece::kGlobstar: row[j] = next[j] || (more && row[j + 1]); break;
        case Piece::kGlobstarSlash:
          through_slash = through_slash || (more && text[j] == '/' && next[j + 1]);
          row[j] = next[j] || through_slash;
          break;
      }
    }
    std::swap(next, row);
  }
  return next[0];
}

// Whether `g` matches `path` (a file, or a directory when `directory`) or a directory above it.
bool matches(const ExcludeGlob& g, std::string_view path, bool directory) {
  for (std::size_t end = path.size(); end != 0 && end != std::string_view::npos; end = path.rfind('/', end - 1)) {
    if (g.directories_only && !directory && end == path.size()) continue;
    const std::string_view here = path.substr(0, end);
    const std::string_view name = g.anchored ? here : here.substr(here.rfind('/') + 1);
    if (path_glob(g.pattern, name)) return true;
  }
  return false;
}

bool excluded(const std::vector<ExcludeGlob>& globs, std::string_view path, std::string_view relative, bool directory) {
  path = without_dot_slash(path);
  relative = without_dot_slash(relative);
  return std::any_of(globs.begin(), globs.end(), [&](const ExcludeGlob& g) {
    // A leading "/" anchors at the -f directory, as in .gitignore (and may be an absolute path).
    if (g.anchored && g.pattern.starts_with('/') &&
        matches({g.pattern.substr(1), true, g.directories_only}, relative, directory))
      return true;
    return matches(g, relative, directory) || (g.anchored && matches(g, path, directory));
  });
}

}  // namespace

Result<std::vector<std::string>> input_files(const ManifestArgs& a) {
  std::vector<ExcludeGlob> globs;
  for (const auto& g : a.excludes) globs.push_back(parse_exclude(g));
  files::SkipPath skip;
  if (!globs.empty())
    skip = [&globs](std::string_view path, std::string_view relative, bool directory) {
      return excluded(globs, path, relative, directory);
    };
  auto found = files::expand_inputs(a.files, skip);
  if (!found) return found;
  if (found->empty()) return Failure{"no input files found in " + a.files.front()};
  return found;
}

void add_input_flags(CLI::App& c, ManifestArgs& a, const std::string& observed_help) {
  c.add_option("--observed", a.observed, observed_help)->check(CLI::ExistingFile)->allow_extra_args(false);
  c.add_option("--exclude", a.excludes,
      "skip what matches this glob, as .gitignore does (repeatable): a NAME is a file or directory at any depth; "
      "a glob with a '/' is a path below the -f directory; '*' stays within a name, '**' does not; './' never matters")
      ->allow_extra_args(false);
  c.add_option("--config", a.config_file, "YAML config file");
  c.add_option("-j,--jobs", a.jobs, "threads working on documents (0: one per core); output is the same for any")
      ->capture_default_str();
}

unsigned runner_threads(const ManifestArgs& a) { return a.jobs ? a.jobs : default_threads(); }

Status open_input(manifests::OfflineRunner& runner, const std::string& f) {
  if (f == "-") return runner.process("<stdin>", std::cin);
  std::ifstream in(f, std::ios::binary);
  if (!in) return Failure{f + ": cannot open: " + std::strerror(errno)};
  return runner.process(f, in);
}

}  // namespace shmguard::cli
