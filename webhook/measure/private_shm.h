// A shared-memory filesystem as `observe` measures it: how full it is, and a private tmpfs of a
// given size mounted over it in a new mount namespace (what a pod's sizeLimit or `docker run
// --shm-size` gives its processes). The path is the caller's: /dev/shm for observe, a scratch
// directory for the tests.
#pragma once

#include <cstdint>

#include "base/result.h"

namespace shmguard::measure {

// Bytes in use on the filesystem at `path` (statvfs: blocks - free blocks), and with `total` its
// size; 0 (total untouched) when it cannot be read.
std::uint64_t used_bytes(const char* path, std::uint64_t* total = nullptr);

// Moves this process into a new mount namespace whose mounts do not propagate back, and mounts a
// fresh tmpfs of `bytes` (mode 1777) at `path` there: the process and the children it starts
// afterwards see it; nothing outside does. Needs CAP_SYS_ADMIN (root); the failure says which step.
Status private_tmpfs(const char* path, std::uint64_t bytes);

}  // namespace shmguard::measure
