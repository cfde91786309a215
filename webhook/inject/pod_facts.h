// What the engine reads off a pod before it decides: whether its shape can be patched safely,
// its memory limit, the first mount at /dev/shm (a user's own), shmguard's own volume, and the
// sizes a pod already holds. Pure: pod JSON in, facts out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace shmguard::inject {

inline constexpr const char* kVolumeName = "shmguard-dshm";

struct PodFacts {
  std::optional<std::uint64_t> memory_limit;  // the pod's, else the sum of its regular containers'
  const nlohmann::json* shm_volume_mount = nullptr;  // first container mount at /dev/shm
  std::optional<std::size_t> owned_volume;  // index of shmguard's own volume in spec.volumes
  std::string invalid;  // why the pod cannot be patched safely
};

// `spec`: the pod's spec when it is an object, else null.
PodFacts gather_pod_facts(const nlohmann::json& pod, const nlohmann::json* spec);

// The containers whose mounts shmguard manages, as their field names in the pod spec.
std::vector<const char*> managed_container_fields(const config::SelectionConfig& sel);

// The bytes of a quantity the pod already holds (a memory limit, a sizeLimit); nullopt when the
// text is not a quantity or is negative.
std::optional<std::uint64_t> held_bytes(const std::string& raw);

// The sizeLimit of the volume behind `mount`, when it is a sized emptyDir.
std::optional<std::uint64_t> existing_shm_size(const nlohmann::json* spec, const nlohmann::json& mount);

// A container mounts the volume `volume`, or anything at /dev/shm.
bool mounts_volume(const nlohmann::json& container, std::string_view volume);
bool mounts_shm_path(const nlohmann::json& container);

}  // namespace shmguard::inject
