// Pod-template discovery (see templates.h).
#include "manifests/templates.h"

#include "inject/json_fields.h"
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
};

void walk(const json& node, const std::string& pointer, const std::string& path, Owner owner,
          std::size_t depth, std::vector<TemplateRef>& out) {
  if (depth > kMaxDepth) return;
  if (node.is_object()) {
    // A nested resource (List item, embedded object) becomes the owner of what it holds.
    std::string kind = inject::str_field(node, "kind");
    if (!kind.empty() && node.contains("apiVersion")) {
      owner.kind = kind;
      owner.training = is_training_kind(inject::str_field(node, "apiVersion"), kind);
      owner.name.clear();
      owner.namespace_name.clear();
      if (auto md = node.find("metadata"); md != node.end()) {
        owner.name = inject::display_name(*md);
        owner.namespace_name = inject::str_field(*md, "namespace");
      }
    }
    if (is_pod_template(node)) {
      out.push_back({pointer, path.empty() ? "(pod)" : path, owner.kind, owner.name, owner.namespace_name,
                     owner.training});
      return;
    }
    for (const auto& [k, v] : node.items()) {
      if (!v.is_structured()) continue;
      walk(v, pointer + "/" + inject::escape_pointer_token(k), path.empty() ? k : path + "." + k, owner, depth + 1, out);
    }
  } else if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      if (!node[i].is_structured()) continue;
      walk(node[i], pointer + "/" + std::to_string(i), path + "[" + std::to_string(i) + "]", owner,
           depth + 1, out);
    }
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

std::vector<TemplateRef> find_templates(const json& doc) {
  std::vector<TemplateRef> out;
  walk(doc, "", "", Owner{}, 0, out);
  return out;
}

}  // namespace shmguard::manifests
