// What a cluster saw of each owner's /dev/shm, matched to the manifests that define those owners:
// `check --observed` fails a template whose pods outgrew its size or use an eighth of it, and
// `mutate --observed` writes the size their peak needs into the template.
//
// The input is `shmguard top -o json` (best with --watch: each pod's peak) or the monitor's
// /metrics text (shmguard_shm_peak_bytes and shmguard_shm_size_bytes, the peak over each pod's life).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "inject/inject.h"
#include "manifests/templates.h"
#include "sizing/formula.h"

namespace shmguard::manifests {

struct ObservedPod {
  std::string namespace_name, pod, owner_kind, owner_name;  // owner as top and the monitor name it
  std::uint64_t peak = 0;                   // the most seen in use
  std::optional<std::uint64_t> size_limit;  // its /dev/shm's sizeLimit (top only)
  std::optional<std::uint64_t> mounted;     // the tmpfs the kubelet mounted
};

struct Observed {
  std::vector<ObservedPod> pods;
};

// Adds the pods with figures in `text` (top's JSON, or metrics text; told apart by the first
// character) to `into`. A failure names the file and line.
Status read_observed(const std::string& file, const std::string& text, Observed& into);

// Whether the pod was made by the resource `kind` `name` in `namespace_name` ("" : any): its own
// owner, or the one an operator puts between (a Deployment's ReplicaSet, a CronJob's Job, a
// TrainJob's JobSet, a RayJob's RayCluster).
bool made_by(const ObservedPod& pod, const std::string& kind, const std::string& name, const std::string& namespace_name);

// The size pods of the template get, as its manifest gives it: the user's own sizeLimit, else the
// one shmguard computes. None when the engine gave neither.
std::optional<std::uint64_t> template_size(const inject::InjectResult& r);

enum class Fit { kFits, kOutgrown, kWasteful };
inline constexpr std::uint64_t kOutgrownPercent = 90;  // peak at or above this share of the size
inline constexpr std::uint64_t kWastefulFactor = 8;    // size above this many times the peak

struct OwnerSeen {
  Fit fit = Fit::kFits;
  std::uint64_t size = 0;       // the template's size
  std::uint64_t peak = 0;       // the most its pods were seen to use
  std::uint64_t suggested = 0;  // what that peak needs (sizing::size_for_peak, as top suggests)
  std::size_t pods = 0;         // pods the peak is over
  std::string message;          // "peak 3.5Gi in 2 pods of JobSet team-a/bert is 97% of 3.6Gi: ..."
};

// What the observed pods say of the template at `ref`, of size `size`: its owner's pods, narrowed
// to the template's own where they can be told apart (a Kubeflow replica's pods by their name,
// NAME-master-0 for the Master template; then those whose /dev/shm has exactly `size`). None when
// no pod of the owner has figures.
std::optional<OwnerSeen> judge_observed(const Observed& seen, const TemplateRef& ref, std::uint64_t size,
                                        const sizing::Params& params);

// The owners with figures that none of `refs` made: "JobSet team-a/bert (namespace team-a, 2 pods)".
std::vector<std::string> owners_without_document(const Observed& seen, const std::vector<TemplateRef>& refs);

// The edit that gives the template `size`, as an RFC 6902 patch of the template at `rep.ref`
// (`tmpl` is that template): the sizeLimit of the user's own /dev/shm volume when it has one;
// else `shmguard.io/size` (a TrainJob's spec.annotations), and shmguard's own volume updated by
// the engine when the template already carries it. A failure says why there is no place for it.
Result<nlohmann::json> size_edit(const inject::InjectResult& result, const TemplateRef& ref, const nlohmann::json& tmpl,
                                 std::uint64_t size, const config::Config& cfg);

}  // namespace shmguard::manifests
