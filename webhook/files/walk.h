// The files the -f arguments of `mutate`, `check` and `review` name: directory walks that never skip
// a path silently.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace shmguard::files {

// Whether a path is left out (--exclude): `path` as the walk spells it (the -f directory as given,
// then the names below it), `relative` the same below that directory, and whether it is a
// directory. A file named by an -f argument itself is asked too: `relative` is then its path as
// given (only its name when that path is absolute: what lies above is not the user's tree).
using SkipPath = std::function<bool(std::string_view path, std::string_view relative, bool directory)>;

// Expands -f arguments: "-" (stdin) and files as given; directories recursively, their .yaml,
// .yml and .json files sorted. Symlinks are followed (a directory once: cycles end there). A path
// that does not exist, an unreadable directory or a dangling link is an error naming the path
// and the reason, unless `skip` leaves it out: a directory it leaves out is not entered at all.
Result<std::vector<std::string>> expand_inputs(const std::vector<std::string>& args, const SkipPath& skip = {});

}  // namespace shmguard::files
