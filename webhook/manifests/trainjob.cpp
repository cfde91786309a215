// A TrainJob's trainer pod (see trainjob.h).
#include "manifests/trainjob.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "base/json_fields.h"
#include "base/text.h"

namespace shmguard::manifests::trainjob {
namespace {

using nlohmann::json;

constexpr const char* kProcsEnv = "PET_NPROC_PER_NODE";

std::string group_of(std::string_view api_version) { return std::string(api_version.substr(0, api_version.find('/'))); }

// A scalar field as its text: 4 and "4" alike; "" when absent or not a scalar.
std::string scalar_text(const json* v) {
  if (!v) return "";
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number_integer()) return v->dump();
  return "";
}

// resource.Quantity.Value() of a CPU amount: rounded up ("500m" -> 1, "1.5" -> 2); 0 when unreadable.
long long cpu_value(const json* q) {
  const std::string s = q && q->is_number() ? q->dump() : scalar_text(q);
  if (s.empty()) return 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(v) || v < 0 || v > 1e9) return 0;
  const std::string unit(end);
  if (unit == "m") return static_cast<long long>(std::ceil(v / 1000));
  if (unit.empty()) return static_cast<long long>(std::ceil(v));
  return 0;
}

// The runtime's trainer job's pod template: the replicated job labelled as the trainer step (as
// Trainer finds it), else the one named "node".
json runtime_template(const json& runtime) {
  const json* spec = object_at(runtime, "spec");
  const json* tmpl = spec ? object_at(*spec, "template") : nullptr;
  const json* js = tmpl ? object_at(*tmpl, "spec") : nullptr;
  const json* chosen = nullptr;
  for (const auto& job : array_items(js, "replicatedJobs")) {
    const json* jt = object_at(job, "template");
    const json* md = jt ? object_at(*jt, "metadata") : nullptr;
    const json* labels = md ? object_at(*md, "labels") : nullptr;
    if (labels && str_field(*labels, kAncestorLabel) == "trainer") { chosen = &job; break; }
    if (!chosen && str_field(job, "name") == kTrainerContainer) chosen = &job;
  }
  if (!chosen) return json::object();
  const json* jt = object_at(*chosen, "template");
  const json* jspec = jt ? object_at(*jt, "spec") : nullptr;
  const json* pod = jspec ? object_at(*jspec, "template") : nullptr;
  return pod ? *pod : json::object();
}

void upsert_env(json& container, const json& var) {
  json& env = container["env"];
  if (!env.is_array()) env = json::array();
  const std::string name = str_field(var, "name");
  for (auto& e : env)
    if (str_field(e, "name") == name) {
      e = var;
      return;
    }
  env.push_back(var);
}

// builder.go Trainer(): the TrainJob's image, command, args, resources and env on the container.
void apply_trainer(json& c, const json& trainer) {
  for (const char* key : {"image", "command", "args"})
    if (const json* v = child(trainer, key); v && !v->is_null()) c[key] = *v;
  if (const json* r = object_at(trainer, "resourcesPerNode"); r && (child(*r, "limits") || child(*r, "requests"))) {
    json req = json::object();
    for (const char* key : {"limits", "requests"})
      if (const json* v = object_at(*r, key)) req[key] = *v;
    c["resources"] = std::move(req);
  }
  for (const auto& e : array_items(trainer, "env"))
    if (e.is_object()) upsert_env(c, e);
}

void merge_into(json& md, const char* key, const json* from) {
  if (!from || !from->is_object()) return;
  if (!md.contains(key) || !md[key].is_object()) md[key] = json::object();
  for (const auto& [k, v] : from->items()) md[key][k] = v;
}

}  // namespace

bool is_trainjob(std::string_view api_version, std::string_view kind) {
  return kind == "TrainJob" && group_of(api_version) == "trainer.kubeflow.org";
}

bool is_runtime(std::string_view api_version, std::string_view kind) {
  return (kind == "TrainingRuntime" || kind == "ClusterTrainingRuntime") && group_of(api_version) == "trainer.kubeflow.org";
}

std::string runtime_name(const json& object) {
  const json* md = object_at(object, "metadata");
  return str_field(object, "kind") + "/" + (md ? str_field(*md, "name") : std::string());
}

std::string referenced_runtime(const json& trainjob) {
  const json* spec = object_at(trainjob, "spec");
  const json* ref = spec ? object_at(*spec, "runtimeRef") : nullptr;
  std::string kind = ref ? str_field(*ref, "kind") : "";
  return (kind.empty() ? "ClusterTrainingRuntime" : kind) + "/" + (ref ? str_field(*ref, "name") : std::string());
}

std::string torch_procs(const json& trainer, const json& runtime) {
  const json* spec = object_at(runtime, "spec");
  const json* policy = spec ? object_at(*spec, "mlPolicy") : nullptr;
  const json* torch = policy ? object_at(*policy, "torch") : nullptr;
  std::string npp = scalar_text(child(trainer, "numProcPerNode"));
  if (npp.empty() && torch) npp = scalar_text(child(*torch, "numProcPerNode"));
  if (npp.empty()) npp = "auto";
  const json* r = object_at(trainer, "resourcesPerNode");
  if (!r) return npp;
  auto has_gpu = [](const json& res) {
    return std::any_of(res.items().begin(), res.items().end(), [](const auto& kv) {
      return lowercase(kv.key()).find("gpu") != std::string::npos;
    });
  };
  const std::string fallback = npp == "auto" ? "auto" : npp == "cpu" ? "1" : npp;
  auto uses_cpu = [&](const json& res) {
    if (npp == "auto") return !has_gpu(res);
    if (npp == "cpu") return res.contains("cpu");
    return false;
  };
  // calculateNumProcPerNode: CPUs when the rule says so, the fallback otherwise; 1 without resources.
  auto calc = [&](const json* res, bool& used) -> std::string {
    used = false;
    if (!res) return "1";
    if (!uses_cpu(*res)) return fallback;
    used = true;
    return std::to_string(std::max<long long>(1, cpu_value(child(*res, "cpu"))));
  };
  bool used = false;
  std::string n = calc(object_at(*r, "limits"), used);
  if (!used) n = calc(object_at(*r, "requests"), used);  // as Trainer does: no requests gives 1
  return n;
}

json build_pod(const json& trainjob, const json& runtime) {
  json pod = runtime.is_object() ? runtime_template(runtime) : json::object();
  const json* spec = object_at(trainjob, "spec");
  const json* trainer = spec ? object_at(*spec, "trainer") : nullptr;
  json& pspec = pod["spec"];
  if (!pspec.is_object()) pspec = json::object();
  if (!runtime.is_object()) pspec["containers"] = json::array({{{"name", kTrainerContainer}}});
  const json* rspec = object_at(runtime, "spec");
  const json* policy = rspec ? object_at(*rspec, "mlPolicy") : nullptr;
  // The torch plugin sets PET_NPROC_PER_NODE; without the runtime, a stated numProcPerNode is
  // taken as meant for it.
  const bool torch = policy ? object_at(*policy, "torch") != nullptr
                            : trainer && child(*trainer, "numProcPerNode") != nullptr;
  if (pspec["containers"].is_array() && trainer) {
    for (auto& c : pspec["containers"]) {
      if (!c.is_object() || str_field(c, "name") != kTrainerContainer) continue;
      apply_trainer(c, *trainer);
      if (torch) upsert_env(c, {{"name", kProcsEnv}, {"value", torch_procs(*trainer, runtime)}});
    }
  }
  json& md = pod["metadata"];
  if (!md.is_object()) md = json::object();
  const json* tmd = object_at(trainjob, "metadata");
  const std::string name = tmd ? str_field(*tmd, "name") : "";
  if (!md.contains("name") && !md.contains("generateName")) md["generateName"] = (name.empty() ? "trainjob" : name) + "-node-0-0-";
  merge_into(md, "labels", spec ? child(*spec, "labels") : nullptr);
  md["labels"][kAncestorLabel] = "trainer";
  merge_into(md, "annotations", spec ? child(*spec, "annotations") : nullptr);
  pod["apiVersion"] = "v1";
  pod["kind"] = "Pod";
  return pod;
}

}  // namespace shmguard::manifests::trainjob
