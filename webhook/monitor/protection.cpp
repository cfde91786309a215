// Pods shmguard missed (see protection.h).
#include "monitor/protection.h"

#include <algorithm>

#include "base/json_fields.h"
#include "inject/inject.h"
#include "sizing/quantity.h"

namespace shmguard::monitor {
namespace {

using nlohmann::json;

bool has_value(const json& values, const std::string& v) {
  if (!values.is_array()) return false;
  return std::any_of(values.begin(), values.end(), [&](const json& x) { return x.is_string() && x.get_ref<const std::string&>() == v; });
}

// One matchExpressions entry over `labels`.
bool expression_matches(const json& e, const json* labels) {
  const std::string key = str_field(e, "key"), op = str_field(e, "operator");
  const json* values = child(e, "values");
  const json* v = labels && labels->is_object() ? child(*labels, key.c_str()) : nullptr;
  const bool present = v && v->is_string();
  if (op == "Exists") return present;
  if (op == "DoesNotExist") return !present;
  if (op == "In") return present && values && has_value(*values, v->get_ref<const std::string&>());
  if (op == "NotIn") return !present || !values || !has_value(*values, v->get_ref<const std::string&>());
  return false;
}

}  // namespace

const UnprotectedRow& unprotected_row(Unprotected r) { return kUnprotectedTable[static_cast<std::size_t>(r)]; }

bool selector_matches(const json& selector, const json* labels) {
  if (!selector.is_object()) return true;
  if (const json* ml = child(selector, "matchLabels"); ml && ml->is_object())
    for (const auto& [k, want] : ml->items()) {
      const json* have = labels && labels->is_object() ? child(*labels, k.c_str()) : nullptr;
      if (!have || *have != want) return false;
    }
  for (const auto& e : array_items(selector, "matchExpressions"))
    if (!expression_matches(e, labels)) return false;
  return true;
}

WebhookView read_webhook_view(const json& configuration, const std::string& entry) {
  WebhookView w;
  const json* md = child(configuration, "metadata");
  w.name = md ? str_field(*md, "name") : "";
  w.created = md ? str_field(*md, "creationTimestamp") : "";
  const json* chosen = nullptr;
  for (const auto& h : array_items(configuration, "webhooks"))
    if (!chosen || str_field(h, "name") == entry) chosen = &h;
  if (!chosen) {
    w.error = "it has no webhooks";
    return w;
  }
  if (const json* s = child(*chosen, "namespaceSelector")) w.namespace_selector = *s;
  if (const json* s = child(*chosen, "objectSelector")) w.object_selector = *s;
  return w;
}

namespace {

// Why a training pod shmguard would inject now has no /dev/shm from it.
Unprotected why_missed(const std::string& ns, const json* labels, const Judge& j, const std::string& created) {
  if (!j.webhook.error.empty()) return Unprotected::kNotInjected;
  const json fallback = {{"kubernetes.io/metadata.name", ns}};
  const auto it = j.namespace_labels.find(ns);
  if (!selector_matches(j.webhook.namespace_selector, it == j.namespace_labels.end() ? &fallback : &it->second))
    return Unprotected::kNamespaceNotSelected;
  if (!selector_matches(j.webhook.object_selector, labels)) return Unprotected::kObjectNotSelected;
  if (!created.empty() && !j.webhook.created.empty() && created < j.webhook.created) return Unprotected::kBeforeInstall;
  if (j.cfg->mode == config::Mode::kAudit) return Unprotected::kAuditMode;
  return Unprotected::kFailedOpen;
}

}  // namespace

Assessment assess_pod(const json& pod, const config::Config& cfg) {
  Assessment a;
  const json* md = child(pod, "metadata");
  if (!md) return a;
  a.created = str_field(*md, "creationTimestamp");
  const inject::InjectResult r = inject::inject_pod(pod, cfg);
  if (r.action == inject::Action::kInjected) {
    a.kind = Assessment::Kind::kMissing;
    a.need = r.size();
    if (const json* labels = child(*md, "labels")) a.labels = *labels;
  } else if (r.action == inject::Action::kUserManaged && r.too_small) {
    a.kind = Assessment::Kind::kTooSmall;
    a.need = r.size();
    a.has = r.existing_size;
  }
  return a;
}

Protection judge_assessed(const Assessment& a, const std::string& ns, const Judge& j) {
  Protection p;
  if (!j.cfg) return p;
  p.created = a.created;
  if (a.kind == Assessment::Kind::kMissing) {
    p.reason = why_missed(ns, a.labels.is_null() ? nullptr : &a.labels, j, a.created);
    p.need = a.need;
  } else if (a.kind == Assessment::Kind::kTooSmall) {
    p.reason = Unprotected::kTooSmall;
    p.need = a.need;
    p.has = a.has;
  }
  return p;
}

Protection judge_pod(const json& pod, const Judge& j) {
  const json* md = child(pod, "metadata");
  if (!md || !j.cfg) return {};
  return judge_assessed(assess_pod(pod, *j.cfg), str_field(*md, "namespace"), j);
}

std::string unprotected_message(const Protection& p, const std::string& ns, const Judge& j) {
  const std::string need = sizing::format_quantity(p.need);
  if (p.reason == Unprotected::kTooSmall)
    return "its own /dev/shm has sizeLimit " + sizing::format_quantity(p.has.value_or(0)) + " where its hints need " + need +
           ": a DataLoader that needs more dies with a bus error; raise the sizeLimit, or drop that volume and let shmguard size it";
  const std::string head = "training pod without the /dev/shm it needs (" + need +
                           "): it has the container runtime's 64 MiB, and a DataLoader in it can die of a bus error; ";
  const std::string config = "MutatingWebhookConfiguration " + j.webhook.name;
  switch (p.reason) {
    case Unprotected::kBeforeInstall:
      return head + "it was created at " + p.created + ", before " + config + " (" + j.webhook.created +
             "): recreate it (delete the pod, or restart its job) to have it sized";
    case Unprotected::kFailedOpen:
      return head + "it was created at " + p.created + ", after " + config + " (" + j.webhook.created +
             "), without an answer from the webhook (failurePolicy Ignore admitted it: see the API server's "
             "apiserver_admission_webhook_fail_open_count and shmguard's pods); recreate it to have it sized";
    case Unprotected::kNamespaceNotSelected:
      return head + "namespace " + ns + " is outside the namespaceSelector of " + config +
             " (the chart's webhook.namespaceSelector and webhook.excludeNamespaces)";
    case Unprotected::kObjectNotSelected:
      return head + "its labels are outside the objectSelector of " + config + " (the chart's webhook.objectSelector)";
    case Unprotected::kAuditMode:
      return head + "shmguard runs with mode: audit, which never patches (set mode: enforce)";
    case Unprotected::kNotInjected:
      return head + "shmguard did not inject it, and why is unknown: " + j.webhook.error;
    case Unprotected::kNo:
    case Unprotected::kTooSmall:
    case Unprotected::kCount: break;
  }
  return "";
}

}  // namespace shmguard::monitor
