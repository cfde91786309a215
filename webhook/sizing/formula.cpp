// The sizing formula (see formula.h and docs/sizing.md "How the size is computed").
#include "sizing/formula.h"

#include <algorithm>

namespace shmguard::sizing {

std::uint64_t with_headroom(Saturating& s, std::uint64_t bytes, std::uint32_t headroom_milli) {
  // Headroom is kept in thousandths: bytes = 1000q + r, so bytes x h / 1000 = q x h + r x h / 1000,
  // the second term rounded up, and nothing overflows before the saturating product.
  return s.add(s.mul(bytes / 1000, headroom_milli), (bytes % 1000 * headroom_milli + 999) / 1000);
}

std::uint64_t size_for_peak(std::uint64_t peak, const Params& cfg) {
  Saturating s{kArithmeticLimit};
  const std::uint64_t scaled = with_headroom(s, peak, cfg.headroom_milli);
  const std::uint64_t rounded = s.mul((scaled + kMi - 1) / kMi, kMi);
  return std::max(s.overflow ? kArithmeticLimit : rounded, cfg.min);
}

bool has_formula_inputs(const SizingInput& in) {
  return in.batch_size && in.num_workers && in.sample_size;
}

namespace {


// "procs 4 from PET_NPROC_PER_NODE", "procs 1 (default; PET_NPROC_PER_NODE \"auto\" unknown)".
std::string procs_clause(std::uint64_t procs, const SizingInput& in) {
  std::string c = "procs " + std::to_string(procs);
  if (!in.procs_source.empty()) return c + " from " + in.procs_source;
  c += " (default";
  for (std::size_t i = 0; i < in.procs_unknown.size(); ++i) c += (i == 0 ? "; " : ", ") + in.procs_unknown[i];
  return c + (in.procs_unknown.empty() ? ")" : " unknown)");
}

}  // namespace

std::string headroom_text(std::uint32_t headroom_milli) {
  std::string s = std::to_string(headroom_milli / 1000);
  std::uint32_t frac = headroom_milli % 1000;
  if (frac != 0) {
    std::string f = std::to_string(frac);
    f = std::string(3 - f.size(), '0') + f;
    while (!f.empty() && f.back() == '0') f.pop_back();
    s += "." + f;
  }
  return s;
}

// ---- the arithmetic: numbers only ----

namespace {

FormulaTerms formula_terms(const SizingInput& in, const Params& cfg, std::uint64_t procs, std::uint64_t& need) {
  Saturating s{kArithmeticLimit};
  FormulaTerms t;
  t.prefetch = in.prefetch_factor.value_or(cfg.prefetch_factor);
  t.batch = s.mul(*in.batch_size, *in.sample_size);
  t.loader = s.mul(s.add(s.mul(*in.num_workers, t.prefetch), 2), t.batch);
  const std::uint64_t scaled = with_headroom(s, s.mul(procs, t.loader), cfg.headroom_milli);
  t.nccl = procs > 1 ? s.mul(procs, cfg.nccl_per_process) : 0;
  need = s.add(s.add(scaled, t.nccl), cfg.base);
  t.rounded = s.mul((need + kMi - 1) / kMi, kMi);
  t.overflow = s.overflow;
  return t;
}

void formula_size(const SizingInput& in, const Params& cfg, SizingResult& r) {
  r.source = SizeSource::kFormula;
  const FormulaTerms& t = *(r.terms = formula_terms(in, cfg, r.procs, r.need));
  if (t.overflow) {
    r.bytes = cfg.max;
    r.bound = Bound::kSaturated;
  } else if (t.rounded < cfg.min) {
    r.bytes = cfg.min;
    r.bound = Bound::kMin;
  } else if (t.rounded > cfg.max) {
    r.bytes = cfg.max;
    r.bound = Bound::kMax;
  } else {
    r.bytes = t.rounded;
  }
}

// Batch and workers known, the sample size not (a command never states it): the samples in flight
// and the largest sample `size` holds by the formula,
// floor((size - fixed) / (procs x samples x headroom)) in whole KiB.
InFlight in_flight(const SizingInput& in, const Params& cfg, std::uint64_t procs, std::uint64_t size) {
  Saturating s{kArithmeticLimit};
  InFlight f;
  f.prefetch = in.prefetch_factor.value_or(cfg.prefetch_factor);
  f.batches = s.add(s.mul(*in.num_workers, f.prefetch), 2);
  f.samples = s.mul(f.batches, *in.batch_size);
  const std::uint64_t fixed = s.add(cfg.base, procs > 1 ? s.mul(procs, cfg.nccl_per_process) : 0);
  const std::uint64_t per_sample = s.mul(s.mul(procs, f.samples), cfg.headroom_milli);
  if (size > fixed && per_sample > 0) f.largest_sample = s.mul(size - fixed, 1000) / per_sample / kKi * kKi;
  if (s.overflow) f.largest_sample = 0;
  return f;
}

// Without batch-size, num-workers and sample-size: the configured default, within the memory limit.
void default_size(const SizingInput& in, const Params& cfg, SizingResult& r) {
  r.source = SizeSource::kDefault;
  r.need = r.bytes = cfg.default_size;
  if (in.memory_limit && *in.memory_limit < r.bytes) {
    r.bytes = *in.memory_limit;
    r.bound = Bound::kMemoryLimit;
  }
  if (in.batch_size && in.num_workers && !in.sample_size) r.in_flight = in_flight(in, cfg, r.procs, r.bytes);
}

}  // namespace

SizingResult size_of(const SizingInput& in, const Params& cfg) {
  SizingResult r;
  r.procs = in.procs.value_or(1);
  r.procs_source = in.procs_source;
  if (in.explicit_size) {  // shmguard.io/size: taken as given, clamped to max
    r.source = SizeSource::kExplicit;
    r.need = r.bytes = *in.explicit_size;
    if (r.bytes > cfg.max) {
      r.bytes = cfg.max;
      r.bound = Bound::kMax;
    }
  } else if (in.inference_size) {  // a serving pod: no DataLoader, NCCL between its ranks
    r.source = SizeSource::kInference;
    r.need = r.bytes = std::min(*in.inference_size, cfg.max);
    if (r.bytes < *in.inference_size) r.bound = Bound::kMax;
  } else if (has_formula_inputs(in)) {
    formula_size(in, cfg, r);
  } else {
    default_size(in, cfg, r);
  }
  r.exceeds_memory_limit = in.memory_limit && r.bytes > *in.memory_limit;
  return r;
}

// ---- the text: rendered from the numbers ----

namespace {

std::string joined(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}

void describe_explicit(SizingResult& r, const Params& cfg) {
  r.explanation = "explicit shmguard.io/size " + format_quantity(r.need);
  if (r.bound != Bound::kMax) return;
  r.explanation += " clamped to max " + format_quantity(cfg.max);
  r.warnings.push_back("shmguard.io/size " + format_human(r.need) + " is above the configured max; using " +
                       format_quantity(cfg.max));
}

// Each part appended to `s` in turn, into the room it already has (parts live until it returns).
template <class... Parts>
void append(std::string& s, const Parts&... parts) {
  (s += ... += parts);
}

// "1 worker", "8 workers".
std::string workers(std::uint64_t n) { return std::to_string(n) + (n == 1 ? " worker" : " workers"); }

void describe_inference(SizingResult& r, const SizingInput& in) {
  r.explanation = "inference with tensor parallel " + std::to_string(in.tensor_parallel) +
                  " in one pod (NCCL between its ranks uses /dev/shm): inference.size " +
                  format_quantity(*in.inference_size);
  if (r.bound == Bound::kMax) r.explanation += " clamped to max " + format_quantity(r.bytes);
}

void describe_formula(SizingResult& r, const SizingInput& in, const Params& cfg) {
  const FormulaTerms& t = *r.terms;
  const std::string procs = std::to_string(r.procs);
  if (r.bound == Bound::kSaturated) {
    r.explanation = "sizing arithmetic saturated; using max " + format_quantity(cfg.max);
    r.warnings.push_back("shm sizing overflowed (absurd annotation values); using max " + format_quantity(cfg.max));
    return;
  }
  // One buffer, appended to: the text with describe()'s notes after it is ~300 bytes, and a chain
  // of operator+ reallocates it at each doubling (the admission hot path builds it for every pod).
  std::string e;
  e.reserve(512);
  const std::string batch = format_human(t.batch), loader = format_human(t.loader);
  append(e, "batch ", std::to_string(*in.batch_size), " x ", format_human(*in.sample_size), " = ", batch,
         "; loader (", workers(*in.num_workers), " x prefetch ", std::to_string(t.prefetch), " + 2) x ", batch, " = ",
         loader, "; ", procs_clause(r.procs, in), "; need ", procs, " x ", loader, " x ",
         headroom_text(cfg.headroom_milli));
  if (t.nccl) e += " + nccl " + procs + " x " + format_human(cfg.nccl_per_process);
  e += " + base " + format_human(cfg.base) + " = " + format_human(r.need);
  if (r.bound == Bound::kMin) {
    e += " -> min " + format_quantity(cfg.min);
  } else if (r.bound == Bound::kMax) {
    e += " -> clamped to max " + format_quantity(cfg.max);
    r.warnings.push_back("/dev/shm need " + format_human(r.need) + " is above the configured max; using " +
                         format_quantity(cfg.max) + " (workers may hit a bus error)");
  } else {
    e += " -> " + format_quantity(r.bytes);
  }
  r.explanation = std::move(e);
}

// "32 workers x prefetch 5 + 2 = 162 batches of 128 = 20736 samples in flight per process; by the
// formula 8Gi holds samples up to 261Ki; set shmguard.io/sample-size"
std::string in_flight_warning(const InFlight& f, const SizingInput& in, std::uint64_t procs, std::uint64_t size) {
  std::string w = workers(*in.num_workers) + " x prefetch " + std::to_string(f.prefetch) + " + 2 = " +
                  std::to_string(f.batches) + " batches of " + std::to_string(*in.batch_size) + " = " +
                  std::to_string(f.samples) + " samples in flight per process";
  if (procs > 1) w += " (" + std::to_string(procs) + " processes)";
  w += "; by the formula " + format_quantity(size);
  w += f.largest_sample > 0 ? " holds samples up to " + format_quantity(f.largest_sample)
                            : " leaves no room for samples that large";
  return w + "; set shmguard.io/sample-size";
}

void describe_default(SizingResult& r, const SizingInput& in, const Params& cfg) {
  std::vector<std::string> missing;
  if (!in.batch_size) missing.emplace_back("batch-size");
  if (!in.num_workers) missing.emplace_back("num-workers");
  if (!in.sample_size) missing.emplace_back("sample-size");
  r.explanation = (in.ignored.empty() ? "" : joined(in.ignored) + " ignored; ") + "no " + joined(missing, "/") +
                  (missing.size() == 1 ? " annotation" : " annotations") + "; default " +
                  format_quantity(cfg.default_size);
  if (r.bound == Bound::kMemoryLimit) r.explanation += " capped at the pod memory limit " + format_quantity(r.bytes);
  // The default does not depend on procs, but the reader still learns what was found (docs/sizing.md
  // "Where procs comes from": the sizing text always says it).
  r.explanation += "; " + procs_clause(r.procs, in);
  if (r.in_flight) r.warnings.push_back(in_flight_warning(*r.in_flight, in, r.procs, r.bytes));
}

}  // namespace

void describe(SizingResult& r, const SizingInput& in, const Params& cfg) {
  if (r.source == SizeSource::kExplicit) describe_explicit(r, cfg);
  else if (r.source == SizeSource::kInference) describe_inference(r, in);
  else if (r.source == SizeSource::kFormula) describe_formula(r, in, cfg);
  else describe_default(r, in, cfg);
  if (!in.ignored.empty() && r.source != SizeSource::kDefault) r.explanation += " (ignored: " + joined(in.ignored) + ")";
  if (!in.notes.empty()) r.explanation += " (" + joined(in.notes, "; ") + ")";
  if (r.exceeds_memory_limit) {
    // Measured on a real node (tests/node/test_memory_limit.py): the kubelet mounts a Memory
    // emptyDir at no more than the memory limit, and the pages written to it are charged to the
    // pod with its processes' memory, so the pod is OOM-killed before /dev/shm fills.
    r.warnings.push_back("/dev/shm " + format_quantity(r.bytes) + " exceeds the pod memory limit " +
                         format_human(*in.memory_limit) + ": the kubelet caps /dev/shm at the limit and its pages " +
                         "count against it with the processes' memory; past the limit the pod is OOM-killed " +
                         "(no bus error): raise the memory limit above " + format_quantity(r.bytes) +
                         " plus what the processes use");
  }
}

SizingResult compute_size(const SizingInput& in, const Params& cfg) {
  SizingResult r = size_of(in, cfg);
  describe(r, in, cfg);
  return r;
}

}  // namespace shmguard::sizing
