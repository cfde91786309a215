// Argo Workflows templates as pods. Argo has no pod template shape: its controller builds each
// pod from a template's `container`, `script` or `containerSet` (argo-workflows
// workflow/controller/workflowpod.go). This unit builds the pod the engine sees the same way and
// maps the engine's patch of that pod back onto the template, so `mutate`'s edits land in the
// template's own fields.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace shmguard::manifests::argo {

// True for argoproj.io's Workflow, WorkflowTemplate, ClusterWorkflowTemplate and CronWorkflow.
bool is_workflow_kind(std::string_view api_version, std::string_view kind);

// The key below `spec` that holds a kind's workflow spec: "" (spec itself) or "workflowSpec"
// (CronWorkflow).
std::string_view workflow_spec_key(std::string_view kind);

// The pod Argo's controller creates from `tmpl` (a template with container, script or
// containerSet), as far as shmguard reads it: the main container(s) named as Argo names them,
// the template's sidecars and initContainers, its volumes and the workflow volumes its mounts name
// (`workflow` holds the workflow spec's `volumes` and `podMetadata`), the workflow's and the
// template's labels and annotations. A shell `script` runs its source as `sh -c source` (Argo
// passes it as a file, which would hide torchrun from the engine); any other interpreter gets the
// file's path, as Argo gives it. Argo's own wait and init containers and podSpecPatch are left out.
nlohmann::json build_pod(const nlohmann::json& tmpl, const nlohmann::json& workflow, const std::string& owner_name);

// The engine's patch of build_pod(tmpl, workflow)'s pod as a patch of the template (paths within
// it): metadata stays metadata, /spec/volumes is the template's `volumes`, a container's
// volumeMounts its own. Parents the template lacks are created. std::nullopt with `why` set when
// an operation has no place in the template (it reaches something the workflow, not the
// template, holds).
std::optional<nlohmann::json> template_patch(const nlohmann::json& pod_patch, const nlohmann::json& tmpl,
                                             const nlohmann::json& workflow, std::string& why);

}  // namespace shmguard::manifests::argo
