// The injection engine's decision (see inject.h): recognition's verdict, then the pod's facts, the
// sizing input and which of four things to do: skip, inject, refresh shmguard's own volume, or
// leave a user's own /dev/shm (warning when it is too small). Each sets the reason and summary.
#include "inject/inject.h"

#include "base/assert.h"
#include "base/json_fields.h"
#include "inject/annotations.h"
#include "inject/command_line.h"
#include "inject/pod_facts.h"
#include "inject/procs.h"
#include "inject/shm_patch.h"
#include "sizing/quantity.h"

namespace shmguard::inject {
namespace {

using nlohmann::json;
using sizing::format_quantity;

// The DataLoader settings the command line states, where no annotation gave them (an annotation
// wins), named in the sizing text.
void read_command_flags(const json& spec, const config::SelectionConfig& sel, sizing::SizingInput& in,
                        InjectResult& r) {
  const LoaderFlags f = loader_flags(command_lines(spec), sel.commands);
  std::vector<std::string> used;
  auto take = [&](std::optional<std::uint64_t>& field, const LoaderFlags::Value& v) {
    if (field || !v.n) return;
    field = v.n;
    used.push_back(v.as_written);
  };
  take(in.batch_size, f.batch_size);
  take(in.num_workers, f.num_workers);
  take(in.prefetch_factor, f.prefetch_factor);
  for (const auto& w : f.warnings) r.warn(w.text, w.flag);
  if (!used.empty()) {
    std::string text = "from the command: ";
    for (std::size_t i = 0; i < used.size(); ++i) text += (i ? ", " : "") + used[i];
    in.notes.push_back(std::move(text));
  }
}

sizing::SizingInput read_sizing(const json* ann, const json& spec, const PodFacts& facts,
                                const InjectOptions& opts, const config::SelectionConfig& sel, InjectResult& r) {
  sizing::SizingInput in;
  const AnnotationValues a = read_annotation_values(ann, r, in.ignored);
  in.batch_size = a[kBatchSizeKey];
  in.num_workers = a[kNumWorkersKey];
  in.sample_size = a[kSampleSizeKey];
  in.prefetch_factor = a[kPrefetchKey];
  const auto procs_annotation = a[kProcsKey];
  in.explicit_size = a[kSizeKey];
  in.memory_limit = facts.memory_limit;
  if (!in.explicit_size) read_command_flags(spec, sel, in, r);
  // An explicit size needs no procs. The default names them in its sizing text (docs/sizing.md "Where procs
  // comes from"); only the formula and the samples-in-flight hint use them, so only then is a
  // doubt about them worth a warning.
  if (in.explicit_size) return in;
  auto procs = count_procs(spec, procs_annotation, opts.owner_procs, sel.accelerators);
  in.procs = procs.count;
  in.procs_source = std::move(procs.source);
  in.procs_unknown = std::move(procs.unresolved);
  if (in.batch_size && in.num_workers)
    for (auto& w : procs.warnings) r.warn(std::move(w));
  else
    for (auto& w : procs.notices) r.warn(std::move(w));
  return in;
}

bool has_sizing_hints(const sizing::SizingInput& in) {
  return in.explicit_size.has_value() || sizing::has_formula_inputs(in);
}

// The pod carries shmguard's own volume: sized again, brought up to date when it changed.
void refresh(const json& pod, const json* spec, const config::Config& cfg, std::size_t volume,
             sizing::SizingResult s, InjectResult& r) {
  auto [patch, stale, what] = refresh_shm_patch(pod, cfg.selection, volume, s);
  r.patch = std::move(patch);
  const std::string size_text = format_quantity(s.bytes);
  r.existing_size = existing_shm_size(spec, own_shm_mount());
  r.stale = stale;
  if (r.patch.empty()) {
    r.reason = Reason::kAlreadyInjected;
    r.summary = "ok: already injected (" + size_text + ")";
  } else {
    r.action = Action::kUpdated;
    r.reason = stale ? Reason::kStale : Reason::kRefreshed;
    r.summary = stale ? "stale: " + what : "ok: injected " + size_text + "; annotations refreshed";
  }
  SHMGUARD_ASSERT(patch_applies(pod, r.patch));
  r.sizing = std::move(s);
}

// A container already mounts something at /dev/shm: the user's; warned about when smaller than
// the size its annotations (or command) give. `s`: that size, when they give any.
void user_managed(const json* spec, const json& mount, std::optional<sizing::SizingResult> s, InjectResult& r) {
  r.action = Action::kUserManaged;
  r.reason = Reason::kUserManaged;
  r.existing_size = existing_shm_size(spec, mount);
  if (s && r.existing_size && *r.existing_size < s->bytes) {
    r.too_small = true;
    r.warn("/dev/shm is mounted with sizeLimit " + format_quantity(*r.existing_size) + " but the annotations need " +
           format_quantity(s->bytes));
    r.summary = "too small: has " + format_quantity(*r.existing_size) + ", needs " + format_quantity(s->bytes);
  }
  r.sizing = std::move(s);
  if (!r.too_small)
    r.summary = "ok: /dev/shm already mounted" +
                (r.existing_size ? " (" + format_quantity(*r.existing_size) + ")" : std::string());
}

void inject(const json& pod, const config::Config& cfg, sizing::SizingResult s, InjectResult& r) {
  const std::string size_text = format_quantity(s.bytes);
  r.patch = new_shm_patch(pod, cfg.selection, size_text, s.explanation);
  SHMGUARD_ASSERT(patch_applies(pod, r.patch));
  r.action = Action::kInjected;
  r.reason = Reason::kInjected;
  r.summary = "would inject " + size_text;
  r.sizing = std::move(s);
}

// A pod that says its DataLoaders load in the main process (0 workers) and runs one process puts
// nothing through /dev/shm: no batches cross processes, no NCCL between ranks. An explicit opt-in
// is still honoured.
bool needs_no_shm(const sizing::SizingInput& in, const Recognition& rec) {
  if (rec.because.starts_with("label shmguard.io/inject") || rec.because.starts_with("annotation shmguard.io/inject"))
    return false;
  return !in.explicit_size && in.num_workers == 0u && in.procs.value_or(1) == 1 && in.procs_unknown.empty();
}

// The sizing input of a serving pod with tensor parallel: the configured inference size.
sizing::SizingInput inference_sizing(const Recognition& rec, const PodFacts& facts, const config::Config& cfg) {
  sizing::SizingInput in;
  in.inference_size = cfg.inference.size;
  in.tensor_parallel = rec.tensor_parallel;
  in.memory_limit = facts.memory_limit;
  in.procs = rec.tensor_parallel;
  in.procs_source = "tensor parallel";
  in.notes.push_back("recognised by: " + rec.rule + "; " + std::to_string(rec.accelerators) + " accelerators");
  return in;
}

}  // namespace

InjectResult inject_pod(const json& pod, const config::Config& cfg, const InjectOptions& opts) {
  InjectResult r;
  json merged;
  const json* ann = effective_annotations(pod, opts.inherited, merged);
  const bool inherits = ann == &merged;
  auto rec = recognize(pod, cfg.selection,
                       RecognizeOptions{.assume_training = opts.assume_training, .mpi_launcher = opts.mpi_launcher,
                                        .owner_kind = opts.owner_kind, .inference = cfg.inference.enabled,
                                        .annotations = inherits ? ann : nullptr});
  r.because = rec.because;
  static_cast<Warnings&>(r) = Warnings{std::move(rec.warnings)};
  auto skip = [&r](Reason reason, std::string summary) {
    r.reason = reason;
    r.summary = std::move(summary);
    return r;
  };
  switch (rec.verdict) {
    case RecognitionVerdict::kOptedOut: return skip(Reason::kOptedOut, "skipped: " + rec.because);
    case RecognitionVerdict::kHostIPC: return skip(Reason::kHostIpc, "skipped: hostIPC uses the node's /dev/shm");
    case RecognitionVerdict::kNotTraining:
      return skip(Reason::kNotTraining, rec.not_pytorch_kind.empty() ? "skipped: not a training pod"
                                                               : "skipped: not PyTorch (" + rec.not_pytorch_kind + ")");
    case RecognitionVerdict::kTraining:
    case RecognitionVerdict::kInference: break;
  }
  const json* spec = object_at(pod, "spec");
  PodFacts facts = gather_pod_facts(pod, spec);
  if (!facts.invalid.empty()) {
    r.warn("shmguard left the pod unchanged: " + facts.invalid);
    return skip(Reason::kInvalidPod, "skipped: " + facts.invalid);
  }
  const bool users_own = !facts.owned_volume && facts.shm_volume_mount;
  sizing::SizingInput in;
  if (rec.verdict == RecognitionVerdict::kInference) {
    in = inference_sizing(rec, facts, cfg);
  } else {
    in = read_sizing(ann, *spec, facts, opts, cfg.selection, r);
    in.notes.push_back("recognised by: " + rec.rule);
    if (inherits && !opts.inherited_from.empty()) in.notes.push_back("annotations from " + opts.inherited_from);
    if (!facts.owned_volume && !users_own && needs_no_shm(in, rec)) {
      r.sizing = sizing::compute_size(in, cfg.sizing);
      return skip(Reason::kNoneNeeded, "ok: none needed (0 DataLoader workers, 1 process)");
    }
  }
  // One size for whichever branch follows: shmguard's volume and a new one are always sized; a
  // user's own /dev/shm only when something gives a size to compare it with. The formula's
  // warnings (memory limit, samples in flight) reach the user whichever branch it is.
  std::optional<sizing::SizingResult> s;
  if (!users_own || has_sizing_hints(in)) {
    s = sizing::compute_size(in, cfg.sizing);
    for (const auto& w : s->warnings) r.warn(w);
  }
  if (facts.owned_volume) refresh(pod, spec, cfg, *facts.owned_volume, std::move(*s), r);
  else if (users_own) user_managed(spec, *facts.shm_volume_mount, std::move(s), r);
  else inject(pod, cfg, std::move(*s), r);
  return r;
}

}  // namespace shmguard::inject
