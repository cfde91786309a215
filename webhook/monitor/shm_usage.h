// How full each running pod's /dev/shm is, from what the API server and the kubelets say (docs/monitoring.md
// "Is /dev/shm the right size?"). Pure: the pod list and each node's Summary API JSON in, one
// record per pod out. Used = capacityBytes - availableBytes (statfs of the tmpfs): the kubelet's
// usedBytes is a `du` walk, and PyTorch unlinks each segment as soon as it is made, so usedBytes
// reads 0 for every DataLoader (measured on the test node: 604061696 used by df and by
// capacity - available, 0 by usedBytes, 40 by `du -sb`).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "monitor/protection.h"
#include "sizing/formula.h"

namespace shmguard::monitor {

struct PodShm {
  std::string namespace_name, name, uid, node;
  std::string owner_kind, owner_name;  // the controller (a JobSet for its Jobs' pods); "" for a bare pod
  std::string volume;                  // the Memory emptyDir mounted at /dev/shm; "" for an unprotected pod without one
  std::optional<std::uint64_t> size_limit;  // its sizeLimit, when set
  // From the node's Summary API; unset until a summary names the volume (the kubelet reports a
  // volume about a minute after the pod starts: its volume stats period).
  std::optional<std::uint64_t> capacity;  // the tmpfs the kubelet mounted (capped at the memory limit)
  std::optional<std::uint64_t> used;      // capacity - available
  std::uint64_t du_bytes = 0;             // the kubelet's usedBytes, shown only to say why it is not used
  std::uint64_t peak = 0;                 // the most `used` seen (top --watch, the monitor)
  std::string stats_time;                 // when the kubelet took the volume's figures (RFC 3339)
  Protection protection;                  // what the engine says of it (unjudged: kNo)
  // Restarts of its containers (status.containerStatuses): their sum, and the last one's
  // container, exit code and end (lastState.terminated), for the leftover check (tracker.h).
  std::uint64_t restarts = 0;
  std::string restarted_container, restart_finished;
  int restart_exit_code = 0;
};

// What a dead process left in /dev/shm is still there after its container restarted: files, which
// the kubelet's `du` walk (usedBytes) counts, where a live DataLoader's unlinked segments read 0.
// Near zero is under 1% of the mounted size, or 1 MiB.
bool leftover_worth_telling(std::uint64_t du_bytes, std::uint64_t capacity);

// A PodList or a Summary API response parsed keeping only the fields these functions read (a
// cluster's pod list carries managedFields, env, probes... that would otherwise be held in memory
// each cycle); a body that is not JSON gives null.
nlohmann::json parse_pod_list(const std::string& text);
nlohmann::json parse_summary(const std::string& text);

nlohmann::json parse_node_list(const std::string& text);
nlohmann::json parse_namespace_list(const std::string& text);  // names and labels

// Where each node's kubelet listens, from a NodeList: its InternalIP (else Hostname, ExternalIP)
// and status.daemonEndpoints.kubeletEndpoint.Port (10250 when absent). Nodes without either are
// left out.
struct KubeletAddress {
  std::string node, address;
  int port = 10250;
};
std::vector<KubeletAddress> kubelet_addresses(const nlohmann::json& node_list);

// Running pods of a PodList that mount a Memory-medium emptyDir at /dev/shm in a regular container,
// whoever made it (shmguard or the user), and with a `judge` also the ones it finds unprotected
// (with no such volume when they have none).
std::vector<PodShm> running_pods(const nlohmann::json& pod_list, const Judge* judge);

// What the monitor keeps of a pod between watch events: its record (no figures yet) and, with a
// config, what the engine said of it, for the cycle to judge against that cycle's webhook view.
struct WatchedPod {
  PodShm pod;
  Assessment assessment;
};
// The pod's record when it runs and mounts a Memory emptyDir at /dev/shm, or (with `cfg`) the engine
// finds it a training pod without the /dev/shm it needs; nullopt when the monitor has nothing to
// keep of it.
std::optional<WatchedPod> watched_pod(const nlohmann::json& pod, const config::Config* cfg);
// A kept pod as a cycle reports it: judged against `judge` (null: not judged); nullopt when it has
// no /dev/shm of its own and `judge` finds it protected.
std::optional<PodShm> judged_pod(const WatchedPod& w, const Judge* judge);
inline std::vector<PodShm> shm_pods(const nlohmann::json& pod_list) { return running_pods(pod_list, nullptr); }

// Where each pod is in a vector of them: by uid, and by "namespace/name" for pods without one.
using PodIndex = std::unordered_map<std::string, std::size_t>;
PodIndex index_pods(const std::vector<PodShm>& pods);

// Fills capacity/used of the pods on `node` from its /stats/summary; returns how many it found.
// `index` is index_pods(pods), built once for every node's summary.
std::size_t apply_summary(std::vector<PodShm>& pods, const PodIndex& index, const std::string& node,
                          const nlohmann::json& summary);
std::size_t apply_summary(std::vector<PodShm>& pods, const std::string& node, const nlohmann::json& summary);

// How a pod's /dev/shm use compares with its size (top's column).
enum class UsageVerdict { kUnknown, kNearlyFull, kOversized, kOk, kCount };
const char* verdict_name(UsageVerdict v);  // "no stats yet", "nearly full", "oversized", "ok"

// The most seen of `used` and `peak` at 90% of the mounted size or above (false without stats):
// the one rule for top's verdict, the monitor's Event and docs/monitoring.md's alert.
bool nearly_full(const PodShm& p);

// Nearly full, as above. A mounted
// size more than 4x what that peak needs (size_for_peak): oversized. Without stats: unknown.
UsageVerdict verdict(const PodShm& p, const sizing::Params& params);

// The shmguard.io/size the peak needs (sizing::size_for_peak, as `observe` proposes it), when the
// verdict is nearly full or oversized.
std::optional<std::uint64_t> suggestion(const PodShm& p, const sizing::Params& params);

}  // namespace shmguard::monitor
