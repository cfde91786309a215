// The JSON patch (RFC 6902) that gives a pod shmguard's /dev/shm: its Memory emptyDir, a mount of
// it in each managed container, and shmguard's two annotations; built new, or bringing a pod that
// already has the volume up to date. Pure: the pod as received in, operations out.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"
#include "sizing/formula.h"

namespace shmguard::inject {

// shmguard's mount of its volume at /dev/shm, as each container gets it.
const nlohmann::json& own_shm_mount();

// The operations that add the volume sized `size_text`, its mounts and the annotations (the size
// and `explanation`) to `pod`, which has none of them.
nlohmann::json new_shm_patch(const nlohmann::json& pod, const config::SelectionConfig& sel,
                             const std::string& size_text, const std::string& explanation);

// A pod that already has shmguard's volume (at spec.volumes[volume_index]), sized `s` again: the
// operations that bring the volume, the mounts and the annotations up to date (none when all are).
struct RefreshPatch {
  nlohmann::json ops = nlohmann::json::array();
  bool stale = false;  // the size on the volume, or a container's mount, was wrong
  std::string what;    // when stale: what was wrong, for the summary
};
RefreshPatch refresh_shm_patch(const nlohmann::json& pod, const config::SelectionConfig& sel, std::size_t volume_index,
                               const sizing::SizingResult& s);

// The patch applies to exactly the object it was built from (checked where assertions are on).
bool patch_applies(const nlohmann::json& pod, const nlohmann::json& patch);

}  // namespace shmguard::inject
