// Pod-template discovery: where the pod templates are inside any Kubernetes object.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace shmguard::manifests {

struct TemplateRef {
  std::string pointer;     // JSON pointer to the template (an object with metadata/spec)
  std::string path;        // human form: "spec.pytorchReplicaSpecs.Worker.template", "(pod)"
  std::string kind;        // kind of the resource that owns it (List items: the item's kind)
  std::string name;        // that resource's metadata.name (or generateName)
  std::string namespace_name;  // that resource's metadata.namespace
  bool training_kind = false;  // inside a Kubeflow training kind: a training pod by definition
};

// True for kinds whose templates are training pods even before their operator labels them.
bool is_training_kind(const std::string& api_version, const std::string& kind);

// Every pod template in `doc`: a Pod itself, the templates of workload kinds, List items,
// and any pod-template-shaped object (an object whose spec has a containers list) elsewhere.
std::vector<TemplateRef> find_templates(const nlohmann::json& doc);

}  // namespace shmguard::manifests
