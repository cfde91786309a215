// KubeRay's own /dev/shm. KubeRay's operator mounts a Memory emptyDir named `shared-mem` at
// /dev/shm on the Ray container (the first) of every head and worker pod it creates, unless that
// container mounts something there already, sized to the container's memory limit (else its
// request, else no limit): ray-operator v1.5.0 controllers/ray/common/pod.go, addEmptyDir and
// findMemoryReqOrLimit. The webhook sees that volume on the pod and leaves it, as it leaves any
// user's own; offline, the group template is judged with the volume KubeRay will add, so `check`
// says the same and does not ask for a volume KubeRay gives.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace shmguard::manifests::kuberay {

// A RayCluster's (or a RayJob's, RayService's or any wrapper's) head or worker group template, by
// its path: "...headGroupSpec.template" or "...workerGroupSpecs[N].template".
bool is_group_template(std::string_view path);

// `tmpl` with the volume and mount KubeRay adds to its first container; true when it added them
// (false: no container, or /dev/shm already mounted there).
bool add_shared_mem(nlohmann::json& tmpl);

}  // namespace shmguard::manifests::kuberay
