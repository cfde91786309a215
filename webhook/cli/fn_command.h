// `shmguard fn`: a KRM function (kustomize/kpt exec function). A config.kubernetes.io/v1
// ResourceList on stdin; the same list with /dev/shm injected into its items' pod templates and a
// `results` entry per injection, finding and warning on stdout.
#pragma once

#include <istream>
#include <ostream>

#include "config/config.h"

namespace shmguard::cli {

// Returns the exit code: 0, or 1 when the input is not a ResourceList (the reason on `err`).
int run_krm_function(std::istream& in, std::ostream& out, std::ostream& err, const config::Config& cfg);

}  // namespace shmguard::cli
