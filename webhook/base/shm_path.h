// Where a pod's /dev/shm is: the one rule for "this volumeMount is at /dev/shm", which the engine
// (a user's own /dev/shm, shmguard's mount), the monitor (the volume to measure), the offline
// edits (the volume to resize) and `observe` (the tmpfs it mounts) all read.
#pragma once

#include <string_view>

namespace shmguard {

inline constexpr const char* kShmPath = "/dev/shm";

// A volumeMount's mountPath that is /dev/shm: "/dev/shm", or "/dev/shm/" with its one trailing
// slash (a container's mount at either path is the same directory).
constexpr bool is_shm_path(std::string_view mount_path) {
  constexpr std::string_view shm = kShmPath;
  return mount_path == shm || (mount_path.size() == shm.size() + 1 && mount_path.starts_with(shm) && mount_path.back() == '/');
}

}  // namespace shmguard
