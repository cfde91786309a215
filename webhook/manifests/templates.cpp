// Pod-template discovery (see templates.h).
#include "manifests/templates.h"

#include <algorithm>

#include "sizing/quantity.h"
#include "base/json_fields.h"
#include "inject/recognize.h"

namespace shmguard::manifests {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxDepth = 64;


bool is_pod_template(const json& o) {
  if (!o.is_object()) return false;
  auto spec = o.find("spec");
  if (spec == o.end() || !spec->is_object()) return false;
  auto c = spec->find("containers");
  return c != spec->end() && c->is_array();
}

struct Owner {
  std::string kind;
  std::string name;
  std::string namespace_name;
  bool training = false;
  std::string step;  // the nearest trainer.kubeflow.org/trainjob-ancestor-step label on the way down
  std::optional<inject::OwnerProcs> procs;
  bool mpi = false;              // an MPIJob, or a Trainer object with an MPI policy
  bool launcher_trains = false;  // its launcher runs ranks too (runLauncherAsWorker / runLauncherAsNode)
  bool launcher = false;         // below its launcher (MPIJob's Launcher, the runtime's `launcher` job)
};

// The field at `path` below `obj`, or null.
const json* at_path(const json& obj, std::initializer_list<const char*> path) {
  const json* cur = &obj;
  for (const char* key : path)
    if (!(cur = child(*cur, key))) return nullptr;
  return cur;
}

// A scalar field as text: numbers (numProcPerNode: 4) and strings ("auto") alike.
std::optional<std::string> scalar_text(const json& obj, std::initializer_list<const char*> path) {
  const json* v = at_path(obj, path);
  if (v && v->is_string()) return v->get<std::string>();
  if (v && v->is_number_integer()) return v->dump();
  return std::nullopt;
}

bool is_true(const json& obj, std::initializer_list<const char*> path) {
  const json* v = at_path(obj, path);
  return v && v->is_boolean() && v->get<bool>();
}

// The process count a Kubeflow training object hands its pods as PET_NPROC_PER_NODE.
std::optional<inject::OwnerProcs> owner_procs(const json& obj, const std::string& kind) {
  if (kind == "PyTorchJob") {
    if (auto v = scalar_text(obj, {"spec", "nprocPerNode"})) return inject::OwnerProcs{"PyTorchJob spec.nprocPerNode", *v};
    if (auto v = scalar_text(obj, {"spec", "elasticPolicy", "nProcPerNode"}))
      return inject::OwnerProcs{"PyTorchJob spec.elasticPolicy.nProcPerNode", *v};
  } else if (kind == "TrainingRuntime" || kind == "ClusterTrainingRuntime") {
    if (auto v = scalar_text(obj, {"spec", "mlPolicy", "torch", "numProcPerNode"}))
      return inject::OwnerProcs{kind + " spec.mlPolicy.torch.numProcPerNode", *v};
  } else if (kind == "TrainJob") {
    if (auto v = scalar_text(obj, {"spec", "trainer", "numProcPerNode"})) {
      // auto and gpu count the GPUs the TrainJob gives each node.
      auto gpus = scalar_text(obj, {"spec", "trainer", "resourcesPerNode", "limits", "nvidia.com/gpu"});
      auto n = gpus ? sizing::parse_count(*gpus) : std::nullopt;
      return inject::OwnerProcs{"TrainJob spec.trainer.numProcPerNode", *v, n ? std::min<std::uint64_t>(*n, inject::kMaxProcs) : 0};
    }
  }
  return std::nullopt;
}

// Finds the pod templates below a document, each with its owner (the nearest resource above it).
// The pointer and path are one buffer each, grown on the way down and cut back on the way up.
struct Walker {
  std::vector<TemplateRef>& out;
  std::string pointer;
  std::string path;

  void visit(const json& node, const Owner& inherited, std::size_t depth);
  void descend(const json& child, const Owner& owner, std::size_t depth, std::string_view ptoken,
               std::string_view ptext, bool index);
};

void Walker::descend(const json& child, const Owner& owner, std::size_t depth, std::string_view ptoken,
                     std::string_view ptext, bool index) {
  const std::size_t p = pointer.size(), q = path.size();
  pointer.append("/").append(ptoken);
  if (index) path.append("[").append(ptext).append("]");
  else path.append(path.empty() ? "" : ".").append(ptext);
  visit(child, owner, depth + 1);
  pointer.resize(p);
  path.resize(q);
}

void Walker::visit(const json& node, const Owner& inherited, std::size_t depth) {
  if (depth > kMaxDepth) return;
  if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      if (!node[i].is_structured()) continue;
      const std::string n = std::to_string(i);
      descend(node[i], inherited, depth, n, n, true);
    }
    return;
  }
  if (!node.is_object()) return;
  // A nested resource (List item, embedded object) becomes the owner of what it holds; copied only then.
  std::optional<Owner> own;
  std::string kind = str_field(node, "kind");
  if (!kind.empty() && node.contains("apiVersion")) {
    own.emplace();
    own->kind = kind;
    own->training = is_training_kind(str_field(node, "apiVersion"), kind);
    if (own->training) own->procs = owner_procs(node, kind);
    own->mpi = own->training && (kind == "MPIJob" || at_path(node, {"spec", "mlPolicy", "mpi"}));
    own->launcher_trains = is_true(node, {"spec", "runLauncherAsWorker"}) ||
                           is_true(node, {"spec", "mlPolicy", "mpi", "runLauncherAsNode"});
    if (auto md = node.find("metadata"); md != node.end()) {
      own->name = display_name(*md);
      own->namespace_name = str_field(*md, "namespace");
    }
  }
  if (const Owner& o = own ? *own : inherited; o.mpi && !o.launcher_trains && !o.launcher &&
                                                 (path.ends_with("mpiReplicaSpecs.Launcher") ||
                                                  (str_field(node, "name") == "launcher" && node.contains("template")))) {
    if (!own) own = inherited;
    own->launcher = true;
  }
  if (auto step = scalar_text(node, {"metadata", "labels", kTrainerStepLabel})) {
    if (!own) own = inherited;
    own->step = *step;
  }
  const Owner& owner = own ? *own : inherited;
  if (is_pod_template(node)) {
    // A runtime's dataset- and model-initializer steps run no DataLoader.
    const bool training = owner.training && (owner.step.empty() || owner.step == "trainer");
    out.push_back({path.empty() ? TemplateKind::kPod : TemplateKind::kTemplate, pointer, path, owner.kind, owner.name, owner.namespace_name,
                   training, owner.procs, owner.launcher, &node});
    return;
  }
  for (const auto& [k, v] : node.items()) {
    if (v.is_structured()) descend(v, owner, depth, escape_pointer_token(k), k, false);
  }
}

}  // namespace

bool is_training_kind(const std::string& api_version, const std::string& kind) {
  const auto group = api_version.substr(0, api_version.find('/'));
  if (group == "kubeflow.org") {
    return kind == "PyTorchJob" || kind == "TFJob" || kind == "MPIJob" || kind == "PaddleJob" ||
           kind == "XGBoostJob" || kind == "JAXJob" || kind == "MXJob";
  }
  if (group == "trainer.kubeflow.org") {
    return kind == "TrainingRuntime" || kind == "ClusterTrainingRuntime" || kind == "TrainJob";
  }
  return false;
}

void append_in_document(const std::string& pointer, const json& patch, json& out) {
  for (auto op : patch) {
    op["path"] = pointer + op["path"].get<std::string>();
    out.push_back(std::move(op));
  }
}

json operator_pod(const json& tmpl, const TemplateRef& ref) {
  if (ref.template_kind == TemplateKind::kPod) return tmpl;
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"spec", tmpl.value("spec", json::object())}};
  json md = tmpl.value("metadata", json::object());
  if (!md.is_object()) md = json::object();
  if (!md.contains("name") && !md.contains("generateName")) md["generateName"] = (ref.name.empty() ? "pod" : ref.name) + "-";
  if (ref.training_kind) {
    if (!md.contains("labels") || !md["labels"].is_object()) md["labels"] = json::object();
    if (!md["labels"].contains("training.kubeflow.org/job-name"))
      md["labels"]["training.kubeflow.org/job-name"] = ref.name.empty() ? "job" : ref.name;
    if (ref.mpi_launcher && !md["labels"].contains("training.kubeflow.org/job-role"))
      md["labels"]["training.kubeflow.org/job-role"] = "launcher";
  }
  if (ref.training_kind && ref.owner_procs && pod["spec"].contains("containers") && pod["spec"]["containers"].is_array()) {
    for (auto& c : pod["spec"]["containers"]) {
      if (!c.is_object()) continue;
      json& env = c["env"];
      if (!env.is_array()) env = json::array();
      const bool has = std::any_of(env.begin(), env.end(), [](const json& e) {
        return str_field(e, "name") == inject::kProcsEnv;
      });
      if (!has) env.push_back({{"name", inject::kProcsEnv}, {"value", ref.owner_procs->value}});
    }
  }
  pod["metadata"] = md;
  return pod;
}

bool may_hold_templates(const YamlNode* n) {
  if (n->kind == YamlNode::Kind::kSequence)
    return std::any_of(n->items.begin(), n->items.end(), may_hold_templates);
  if (n->kind != YamlNode::Kind::kMap) return false;
  return std::any_of(n->pairs.begin(), n->pairs.end(), [](const auto& kv) {
    const auto& [k, v] = kv;
    return (k->kind == YamlNode::Kind::kScalar && v->kind == YamlNode::Kind::kSequence && k->value == "containers") ||
           may_hold_templates(v);
  });
}

std::vector<TemplateRef> find_templates(const json& doc) {
  std::vector<TemplateRef> out;
  Walker{out, {}, {}}.visit(doc, Owner{}, 0);
  return out;
}

}  // namespace shmguard::manifests
