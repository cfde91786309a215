// A private tmpfs in a mount namespace, and how full a filesystem is (see private_shm.h).
#include "measure/private_shm.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace shmguard::measure {

std::uint64_t used_bytes(const char* path, std::uint64_t* total) {
  struct statvfs st{};
  if (::statvfs(path, &st) != 0) return 0;
  if (total) *total = static_cast<std::uint64_t>(st.f_blocks) * st.f_frsize;
  return static_cast<std::uint64_t>(st.f_blocks - st.f_bfree) * st.f_frsize;
}

Status private_tmpfs(const char* path, std::uint64_t bytes) {
  if (::unshare(CLONE_NEWNS) != 0) return Failure{std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno)};
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return Failure{std::string("making mounts private: ") + std::strerror(errno)};
  const std::string opts = "size=" + std::to_string(bytes) + ",mode=1777";
  if (::mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0)
    return Failure{std::string("mounting a tmpfs at ") + path + ": " + std::strerror(errno)};
  return Ok{};
}

}  // namespace shmguard::measure
