// Pod-template discovery (see templates.h).
#include "manifests/templates.h"

#include <algorithm>

#include "base/json_fields.h"
#include "manifests/argo.h"
#include "manifests/trainjob.h"
#include "sizing/quantity.h"
#include "manifests/yaml_internal.h"

namespace shmguard::manifests {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxDepth = 64;


using Kind = YamlNode::Kind;
using internal::scalar_json;

// The tree read as the JSON object to_json() makes of it, without making it: a mapping's member
// is the value of the last pair with that key (JSON keeps the last), a scalar is typed as
// Kubernetes reads it.

// The member `key` of a mapping, or null (absent, or `node` is not a mapping).
const YamlNode* member(const YamlNode* node, std::string_view key) {
  if (!node || node->kind != Kind::kMap) return nullptr;
  const YamlNode* found = nullptr;
  for (const auto& [k, v] : node->pairs)
    if (k->value == key) found = v;
  return found;
}

// The field at `path` below `node`, or null.
const YamlNode* member_at(const YamlNode* node, std::initializer_list<const char*> path) {
  for (const char* key : path)
    if (!(node = member(node, key))) return nullptr;
  return node;
}

// The member `key` when it is a string, else "".
std::string string_member(const YamlNode* node, const char* key) {
  const YamlNode* v = member(node, key);
  if (!v || v->kind != Kind::kScalar) return "";
  json j = scalar_json(*v);
  return j.is_string() ? j.get<std::string>() : std::string();
}

// A scalar field as text: numbers (numProcPerNode: 4) and strings ("auto") alike.
std::optional<std::string> scalar_text(const YamlNode* node, std::initializer_list<const char*> path) {
  const YamlNode* v = member_at(node, path);
  if (!v || v->kind != Kind::kScalar) return std::nullopt;
  json j = scalar_json(*v);
  if (j.is_string()) return j.get<std::string>();
  if (j.is_number_integer()) return j.dump();
  return std::nullopt;
}

bool is_true(const YamlNode* node, std::initializer_list<const char*> path) {
  const YamlNode* v = member_at(node, path);
  if (!v || v->kind != Kind::kScalar) return false;
  json j = scalar_json(*v);
  return j.is_boolean() && j.get<bool>();
}

bool is_structured(const YamlNode* n) { return n->kind != Kind::kScalar; }

bool is_pod_template(const YamlNode* o) {
  const YamlNode* spec = member(o, "spec");
  const YamlNode* c = spec && spec->kind == Kind::kMap ? member(spec, "containers") : nullptr;
  return c && c->kind == Kind::kSequence;
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
  bool list = false;             // a List: its items own what they hold
  std::string job_kind;          // see TemplateRef::job_kind
};

// The process count a Kubeflow training object hands its pods as PET_NPROC_PER_NODE.
std::optional<inject::OwnerProcs> owner_procs(const YamlNode* obj, const std::string& kind) {
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
// The way down is a stack of keys and indexes; the pointer and path are spelled from it only for a
// template found (and the path for an MPI owner's launcher test). A mapping's members are visited
// in the order of their keys, as in the JSON object, so the reports come in the order they always
// did.
struct Walker {
  struct Step {
    std::string_view key;  // a mapping's key (the tree outlives the walk), or
    std::size_t index;     // a sequence's index when `key` is null
  };
  std::vector<TemplateRef>& out;
  std::vector<Step> steps;
  std::vector<const std::pair<YamlNode*, YamlNode*>*> members;

  void visit(const YamlNode* node, const Owner& inherited, std::size_t depth);
  std::optional<Owner> own_of(const YamlNode* node, const std::string& kind, const Owner& inherited) const;
  bool special_kind(const YamlNode* node, const Owner& owner);
  void argo_templates(const YamlNode* node, const Owner& owner);
  void set_owner(TemplateRef& ref, const Owner& owner) const {
    ref.pointer = pointer();
    ref.path = path();
    ref.kind = owner.kind;
    ref.name = owner.name;
    ref.namespace_name = owner.namespace_name;
    ref.job_kind = owner.job_kind;
  }
  void descend(const YamlNode* child, const Owner& owner, std::size_t depth, Step step) {
    steps.push_back(step);
    visit(child, owner, depth + 1);
    steps.pop_back();
  }
  // "/spec/template": each key escaped (RFC 6901).
  std::string pointer() const {
    std::string p;
    for (const Step& s : steps) p.append("/").append(s.key.data() ? escape_pointer_token(s.key) : std::to_string(s.index));
    return p;
  }
  // "spec.pytorchReplicaSpecs.Worker.template", "items[0]": "" for the document itself.
  std::string path() const {
    std::string p;
    for (const Step& s : steps) {
      if (!s.key.data()) p.append("[").append(std::to_string(s.index)).append("]");
      else p.append(p.empty() ? "" : ".").append(s.key);
    }
    return p;
  }
};

void Walker::visit(const YamlNode* node, const Owner& inherited, std::size_t depth) {
  if (depth > kMaxDepth) return;
  if (node->kind == Kind::kSequence) {
    for (std::size_t i = 0; i < node->items.size(); ++i)
      if (is_structured(node->items[i])) descend(node->items[i], inherited, depth, {{}, i});
    return;
  }
  if (node->kind != Kind::kMap) return;
  std::string kind = string_member(node, "kind");
  std::optional<Owner> own;
  if (!kind.empty() && member(node, "apiVersion")) {
    own = own_of(node, kind, inherited);
    if (special_kind(node, *own)) return;
  }
  if (const Owner& o = own ? *own : inherited; o.mpi && !o.launcher_trains && !o.launcher &&
                                                 (path().ends_with("mpiReplicaSpecs.Launcher") ||
                                                  (string_member(node, "name") == "launcher" && member(node, "template")))) {
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
    TemplateRef ref;
    ref.template_kind = steps.empty() ? TemplateKind::kPod : TemplateKind::kTemplate;
    set_owner(ref, owner);
    ref.training_kind = training;
    ref.owner_procs = owner.procs;
    ref.mpi_launcher = owner.launcher;
    ref.node = node;
    out.push_back(std::move(ref));
    return;
  }
  // The members holding collections, each key once (its last pair), in key order: this node's
  // run at the end of `members`, which the walks below it extend and cut back.
  const std::size_t from = members.size();
  for (const auto& kv : node->pairs)
    if (is_structured(kv.second) || std::any_of(members.begin() + static_cast<std::ptrdiff_t>(from), members.end(),
                                                [&](auto* m) { return m->first->value == kv.first->value; }))
      members.push_back(&kv);
  const auto run = members.begin() + static_cast<std::ptrdiff_t>(from);
  std::stable_sort(run, members.end(), [](auto* a, auto* b) { return a->first->value < b->first->value; });
  const std::size_t to = members.size();
  for (std::size_t i = from; i < to; ++i) {
    const auto& [k, v] = *members[i];
    const bool last = i + 1 == to || members[i + 1]->first->value != k->value;
    if (last && is_structured(v)) descend(v, owner, depth, {k->value, 0});
  }
  members.resize(from);
}

// The owner below a resource `node` of `kind`: the resource itself at the top or as a List item;
// below another resource (a Pod inside torchelastic's ElasticJob, a PyTorchJob inside an
// AppWrapper) the outer one still owns the template, and the inner kind says what it runs.
std::optional<Owner> Walker::own_of(const YamlNode* node, const std::string& kind, const Owner& inherited) const {
  const bool list_item = inherited.list && steps.size() >= 2 && !steps.back().key.data() &&
                         steps[steps.size() - 2].key == "items";
  const bool top = inherited.kind.empty() || list_item;
  Owner own = top ? Owner{} : inherited;
  const std::string api = string_member(node, "apiVersion");
  if (top) {
    own.kind = kind;
    own.list = kind.ends_with("List");
    if (const YamlNode* md = member(node, "metadata")) {
      own.name = display_name(string_member(md, "name"), string_member(md, "generateName"));
      own.namespace_name = string_member(md, "namespace");
    }
  }
  if (top || is_training_kind(api, kind)) {
    own.job_kind = kind;
    own.training = is_training_kind(api, kind);
    own.procs = own.training ? owner_procs(node, kind) : std::nullopt;
    own.mpi = own.training && (kind == "MPIJob" || member_at(node, {"spec", "mlPolicy", "mpi"}));
    own.launcher_trains = is_true(node, {"spec", "runLauncherAsWorker"}) ||
                          is_true(node, {"spec", "mlPolicy", "mpi", "runLauncherAsNode"});
  }
  return own;
}

// Kinds whose pods have no pod template: Argo workflows' templates and TrainJobs, found here and
// not searched further. True when `node` was one.
bool Walker::special_kind(const YamlNode* node, const Owner& owner) {
  const std::string api = string_member(node, "apiVersion");
  const std::string kind = string_member(node, "kind");
  if (owner.kind != kind) return false;  // only a top-level resource or List item
  if (argo::is_workflow_kind(api, kind)) {
    argo_templates(node, owner);
    return true;
  }
  if (!trainjob::is_trainjob(api, kind)) return false;
  TemplateRef ref;
  ref.template_kind = TemplateKind::kTrainJob;
  set_owner(ref, owner);
  ref.training_kind = true;
  ref.path += ref.path.empty() ? "spec.trainer" : ".spec.trainer";
  ref.node = node;
  const YamlNode* rref = member_at(node, {"spec", "runtimeRef"});
  const std::string rkind = string_member(rref, "kind");
  ref.runtime = (rkind.empty() ? "ClusterTrainingRuntime" : rkind) + "/" + string_member(rref, "name");
  out.push_back(std::move(ref));
  return true;
}

// spec.templates[] (CronWorkflow: spec.workflowSpec.templates[]) that run a pod.
void Walker::argo_templates(const YamlNode* node, const Owner& owner) {
  const std::string_view key = argo::workflow_spec_key(owner.kind);
  const YamlNode* spec = member(node, "spec");
  const YamlNode* wspec = key.empty() ? spec : member(spec, key);
  const YamlNode* list = member(wspec, "templates");
  if (!list || list->kind != Kind::kSequence) return;
  steps.push_back({"spec", 0});
  if (!key.empty()) steps.push_back({key, 0});
  steps.push_back({"templates", 0});
  for (std::size_t i = 0; i < list->items.size(); ++i) {
    const YamlNode* t = list->items[i];
    const YamlNode* set = member(t, "containerSet");
    const bool runs_pod = (member(t, "container") && member(t, "container")->kind == Kind::kMap) ||
                          (member(t, "script") && member(t, "script")->kind == Kind::kMap) ||
                          (set && member(set, "containers") && member(set, "containers")->kind == Kind::kSequence);
    if (!runs_pod) continue;
    steps.push_back({{}, i});
    TemplateRef ref;
    ref.template_kind = TemplateKind::kArgo;
    set_owner(ref, owner);
    ref.node = t;
    ref.context_node = wspec;
    out.push_back(std::move(ref));
    steps.pop_back();
  }
  steps.resize(steps.size() - (key.empty() ? 2 : 3));
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

bool load_context(TemplateRef& ref, std::size_t budget) {
  if (ref.template_kind != TemplateKind::kArgo || !ref.context_node) return true;
  ref.context = json::object();
  for (const char* key : {"volumes", "podMetadata", "podResources"}) {
    const YamlNode* v = member(ref.context_node, key);
    if (!v) continue;
    auto j = to_json(v, budget);
    if (!j) return false;
    ref.context[key] = std::move(*j);
  }
  return true;
}

std::vector<const YamlNode*> find_runtimes(const YamlNode* root) {
  std::vector<const YamlNode*> out;
  auto add = [&](const YamlNode* n) {
    if (trainjob::is_runtime(string_member(n, "apiVersion"), string_member(n, "kind"))) out.push_back(n);
  };
  add(root);
  if (string_member(root, "kind").ends_with("List"))
    if (const YamlNode* items = member(root, "items"); items && items->kind == Kind::kSequence)
      for (const YamlNode* item : items->items) add(item);
  return out;
}

namespace {
// Kinds whose pods shmguard builds without a "containers" list in the object.
bool builds_pods(const std::string& kind) {
  return kind == "TrainJob" || kind == "Workflow" || kind == "WorkflowTemplate" || kind == "ClusterWorkflowTemplate" ||
         kind == "CronWorkflow";
}
}  // namespace

bool may_hold_templates(const YamlNode* n) {
  if (n->kind == YamlNode::Kind::kSequence)
    return std::any_of(n->items.begin(), n->items.end(), may_hold_templates);
  if (n->kind != YamlNode::Kind::kMap) return false;
  return std::any_of(n->pairs.begin(), n->pairs.end(), [](const auto& kv) {
    const auto& [k, v] = kv;
    return (k->kind == YamlNode::Kind::kScalar && v->kind == YamlNode::Kind::kSequence && k->value == "containers") ||
           (k->value == "kind" && v->kind == YamlNode::Kind::kScalar && builds_pods(v->value)) || may_hold_templates(v);
  });
}

std::vector<TemplateRef> find_templates(const YamlNode* root) {
  std::vector<TemplateRef> out;
  if (root) Walker{out, {}, {}}.visit(root, Owner{}, 0);
  return out;
}

}  // namespace shmguard::manifests
