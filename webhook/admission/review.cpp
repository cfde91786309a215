// AdmissionReview decoding, the call into the engine, and the response (see review.h).
#include "admission/review.h"

#include <iterator>
#include <nlohmann/json.hpp>

#include "admission/json_reader.h"
#include "admission/response.h"
#include "base/enum_table.h"
#include "base/limits.h"
#include "inject/annotations.h"
#include "inject/inject.h"
#include "base/json_fields.h"
#include "sizing/quantity.h"

namespace shmguard::admission {
namespace {

using nlohmann::json;


// The parts of an AdmissionReview the webhook reads (a container's command, args and env tell the
// process count, inject/procs.h). Everything else (probes, ports, oldObject, userInfo, ...) is
// validated but not built. Arrays are kept whole, so indexes in the patch still address the
// object as received.
const Keep kContainer{{{"name", nullptr}, {"image", nullptr}, {"volumeMounts", nullptr}, {"resources", nullptr},
                       {"command", nullptr}, {"args", nullptr}, {"env", nullptr}}};
const Keep kContainers{{}, &kContainer};
const Keep kSpec{{{"hostIPC", nullptr},
                  {"containers", &kContainers},
                  {"initContainers", &kContainers},
                  {"ephemeralContainers", &kContainers},
                  {"volumes", nullptr},
                  {"resources", nullptr}}};
const Keep kMetadata{{{"name", nullptr}, {"generateName", nullptr}, {"namespace", nullptr},
                      {"labels", nullptr}, {"annotations", nullptr}}};
const Keep kObject{{{"apiVersion", nullptr}, {"kind", nullptr}, {"metadata", &kMetadata}, {"spec", &kSpec}}};
const Keep kRequest{{{"uid", nullptr}, {"kind", nullptr}, {"resource", nullptr}, {"subResource", nullptr},
                     {"namespace", nullptr}, {"name", nullptr}, {"operation", nullptr}, {"dryRun", nullptr},
                     {"object", &kObject}}};
const Keep kReview{{{"apiVersion", nullptr}, {"kind", nullptr}, {"request", &kRequest}}};

}  // namespace

namespace {
struct DecisionRow {
  Decision decision;
  const char* name;  // in logs and in the metrics' `decision` label
};
constexpr DecisionRow kDecisionTable[] = {
    {.decision = Decision::kInjected, .name = "injected"}, {.decision = Decision::kUpdated, .name = "updated"},
    {.decision = Decision::kAudit, .name = "audit"},       {.decision = Decision::kSkipped, .name = "skipped"},
    {.decision = Decision::kError, .name = "error"},       {.decision = Decision::kRejected, .name = "rejected"},
};
static_assert(in_enum_order(kDecisionTable, &DecisionRow::decision, static_cast<std::size_t>(Decision::kCount)),
              "kDecisionTable: one row for every Decision, in Decision's order");
}  // namespace

const char* decision_name(Decision d) { return kDecisionTable[static_cast<std::size_t>(d)].name; }

std::string base64_encode(std::string_view in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    std::uint32_t v = (static_cast<std::uint8_t>(in[i]) << 16) |
                      (static_cast<std::uint8_t>(in[i + 1]) << 8) | static_cast<std::uint8_t>(in[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i + 1 == in.size()) {
    std::uint32_t v = static_cast<std::uint8_t>(in[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    std::uint32_t v = (static_cast<std::uint8_t>(in[i]) << 16) | (static_cast<std::uint8_t>(in[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::string base64_decode(std::string_view in) {
  std::string out;
  out.reserve(in.size() / 4 * 3);
  std::uint32_t val = 0;
  int bits = -8;
  for (unsigned char c : in) {
    int d;
    if (c >= 'A' && c <= 'Z') d = c - 'A';
    else if (c >= 'a' && c <= 'z') d = c - 'a' + 26;
    else if (c >= '0' && c <= '9') d = c - '0' + 52;
    else if (c == '+') d = 62;
    else if (c == '/') d = 63;
    else continue;
    val = ((val << 6) | static_cast<std::uint32_t>(d)) & 0xFFFFFF;  // only the last 24 bits matter
    bits += 6;
    if (bits >= 0) {
      out += static_cast<char>((val >> bits) & 0xFF);
      bits -= 8;
    }
  }
  return out;
}

std::string sanitize_warning(std::string_view w) {
  std::string out;
  for (char c : w) {
    auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? ' ' : c;
    if (out.size() >= 240) break;
  }
  return out;
}

std::string jobset_to_ask(const json& pod) {
  const json* md = object_at(pod, "metadata");
  if (!md) return "";
  if (const json* an = object_at(*md, "annotations"))
    for (const auto& [k, v] : an->items())
      if (k.starts_with(inject::kAnnotationPrefix)) return "";
  const json* labels = object_at(*md, "labels");
  std::string name = labels ? str_field(*labels, kJobSetNameLabel) : "";
  // Admission runs before validation: a label value that is no object name (a DNS subdomain's
  // characters) is never put into a path.
  if (name.size() > 253 || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") != std::string::npos)
    return "";
  return name;
}

namespace {

// The owner's annotations, when the pod is a JobSet's and carries none of its own: asked of the
// server's lookup, its result noted in the outcome. The engine reads them through `io`.
void ask_owner(const json& pod, const OwnerLookup& lookup, AdmissionOutcome& o, OwnerAnnotations& owner,
               inject::InjectOptions& io) {
  if (!lookup || o.namespace_name.empty()) return;
  std::string jobset = jobset_to_ask(pod);
  if (jobset.empty()) return;
  owner = lookup(o.namespace_name, jobset);
  o.owner_lookup = owner.result;
  o.owner_cached = owner.cached;
  if (!owner.warning.empty()) o.warnings.push_back(owner.warning);
  io.inherited = &owner.annotations;
  io.inherited_from = owner.from;
}

// The engine's decision on a pod CREATE, answered (response.h); anything else admitted as it is.
void decide(const json& req, const config::Config& cfg, const OwnerLookup& lookup, Engine engine, const Echo& to,
            AdmissionOutcome& o) {
  const json empty = json::object();
  const json& kind = req.contains("kind") ? req["kind"] : empty;
  const bool is_pod = str_field(kind, "kind") == "Pod" && str_field(kind, "group").empty();
  const bool create = str_field(req, "operation") == "CREATE";
  const bool subresource = !str_field(req, "subResource").empty();
  auto obj_it = req.find("object");
  if (!is_pod || !create || subresource)
    return allowed(o, to, Decision::kSkipped,
                   !is_pod ? Reason::kNotAPod : (!create ? Reason::kNotCreate : Reason::kSubresource));
  if (obj_it == req.end() || !obj_it->is_object()) {
    o.warnings.push_back("shmguard: the review carried no pod object; admitted unchanged");
    return allowed(o, to, Decision::kSkipped, Reason::kNoObject);
  }
  const json& pod = *obj_it;
  if (o.pod.empty()) {
    if (const json* md = object_at(pod, "metadata")) o.pod = display_name(*md);
  }
  OwnerAnnotations owner;
  inject::InjectOptions io;
  ask_owner(pod, lookup, o, owner, io);
  auto r = engine(pod, cfg, io);
  for (auto& w : r.warnings) o.warnings.push_back(std::move(w.text));  // the review carries the text alone
  if (r.sizing && r.sizing->source == sizing::SizeSource::kFormula)
    o.procs = std::to_string(r.sizing->procs) + " from " +
              (r.sizing->procs_source.empty() ? std::string("default") : r.sizing->procs_source);
  if (!r.mutated()) return allowed(o, to, Decision::kSkipped, r.reason);
  o.size_bytes = r.size();
  o.size = sizing::format_quantity(r.size());
  const bool update = r.action == inject::Action::kUpdated;
  if (cfg.mode == config::Mode::kAudit) {
    o.warnings.push_back("shmguard would " + std::string(update ? "resize /dev/shm to " : "inject ") + o.size +
                         (update ? "" : " at /dev/shm") + " (audit mode)");
    return allowed(o, to, Decision::kAudit, r.reason);
  }
  patched(o, to, update ? Decision::kUpdated : Decision::kInjected, r.reason, base64_encode(r.patch.dump()));
}

}  // namespace

AdmissionOutcome handle_review(std::string_view body, const config::Config& cfg, const OwnerLookup& lookup,
                               Engine engine) {
  auto bad_request = [](std::string msg) { return refused(Reason::kBadRequest, std::move(msg)); };
  json review;
  if (auto parsed = read_json(body, review, kMaxNesting, &kReview); !parsed)
    return bad_request("request body is not valid JSON: " + parsed.error());
  if (!review.is_object()) return bad_request("request body is not a JSON object");
  const std::string api_version = str_field(review, "apiVersion");
  if (str_field(review, "kind") != "AdmissionReview") return bad_request("kind must be AdmissionReview");
  if (api_version != "admission.k8s.io/v1" && api_version != "admission.k8s.io/v1beta1")
    return bad_request("apiVersion must be admission.k8s.io/v1 or admission.k8s.io/v1beta1");
  auto req_it = review.find("request");
  if (req_it == review.end() || !req_it->is_object()) return bad_request("AdmissionReview has no request object");
  const json& req = *req_it;
  const Echo to{api_version, str_field(req, "uid")};
  if (to.uid.empty()) return bad_request("request.uid must be a non-empty string");

  AdmissionOutcome o;
  o.uid = to.uid;
  o.namespace_name = str_field(req, "namespace");
  o.pod = str_field(req, "name");
  // The engine's edge. Our trouble must never block a pod: whatever is thrown (the engine's, an
  // owner lookup's, not only std::exception), the pod is admitted unchanged, with a warning, and
  // counted and logged as kError.
  try {
    decide(req, cfg, lookup, engine, to, o);
  } catch (const std::exception& e) {
    errored(o, to, e.what());
  } catch (...) {
    errored(o, to, "an exception that is not a std::exception");
  }
  return o;
}

}  // namespace shmguard::admission
