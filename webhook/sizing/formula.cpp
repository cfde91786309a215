// The sizing formula (see formula.h and README "How the size is computed").
#include "sizing/formula.h"

#include <algorithm>

namespace shmguard::sizing {

bool has_formula_inputs(const SizingInput& in) {
  return in.batch_size && in.num_workers && in.sample_size;
}

namespace {

// Sizes are bounded well below 2^63 so every intermediate fits; anything above saturates.
constexpr std::uint64_t kArithmeticLimit = 1ULL << 62;

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

SizingResult compute_size(const SizingInput& in, const Params& cfg) {
  SizingResult r;
  if (in.explicit_size) {
    r.source = SizeSource::kExplicit;
    r.need = *in.explicit_size;
    r.bytes = *in.explicit_size;
    r.explanation = "explicit shmguard.io/size " + format_quantity(*in.explicit_size);
    if (r.bytes > cfg.max) {
      r.bytes = cfg.max;
      r.explanation += " clamped to max " + format_quantity(cfg.max);
      r.warnings.push_back("shmguard.io/size " + format_human(*in.explicit_size) +
                           " is above the configured max; using " + format_quantity(cfg.max));
    }
  } else if (has_formula_inputs(in)) {
    r.source = SizeSource::kFormula;
    Saturating s{kArithmeticLimit};
    const std::uint64_t prefetch = in.prefetch_factor.value_or(cfg.prefetch_factor);
    const std::uint64_t procs = in.procs.value_or(1);
    const std::uint64_t batch = s.mul(*in.batch_size, *in.sample_size);
    const std::uint64_t slots = s.add(s.mul(*in.num_workers, prefetch), 2);
    const std::uint64_t loader = s.mul(slots, batch);
    const std::uint64_t all_loaders = s.mul(procs, loader);
    // headroom is kept in thousandths; round the product up to a whole byte.
    std::uint64_t scaled = s.mul(all_loaders, cfg.headroom_milli);
    scaled = scaled / 1000 + (scaled % 1000 != 0 ? 1 : 0);
    const std::uint64_t nccl = procs > 1 ? s.mul(procs, cfg.nccl_per_process) : 0;
    const std::uint64_t need = s.add(s.add(scaled, nccl), cfg.base);
    const std::uint64_t rounded = s.mul((need + kMi - 1) / kMi, kMi);
    r.need = need;

    r.procs = procs;
    r.procs_source = in.procs_source;
    std::string e = "batch " + std::to_string(*in.batch_size) + " x " + format_human(*in.sample_size) +
                    " = " + format_human(batch) + "; loader (" + std::to_string(*in.num_workers) +
                    " workers x prefetch " + std::to_string(prefetch) + " + 2) x " +
                    format_human(batch) + " = " + format_human(loader) + "; " + procs_clause(procs, in) +
                    "; need " + std::to_string(procs) + " x " + format_human(loader) + " x " +
                    headroom_text(cfg.headroom_milli);
    if (nccl) e += " + nccl " + std::to_string(procs) + " x " + format_human(cfg.nccl_per_process);
    e += " + base " + format_human(cfg.base) + " = " + format_human(need);
    if (s.overflow) {
      r.bytes = cfg.max;
      e = "sizing arithmetic saturated; using max " + format_quantity(cfg.max);
      r.warnings.push_back("shm sizing overflowed (absurd annotation values); using max " +
                           format_quantity(cfg.max));
    } else if (rounded < cfg.min) {
      r.bytes = cfg.min;
      e += " -> min " + format_quantity(cfg.min);
    } else if (rounded > cfg.max) {
      r.bytes = cfg.max;
      e += " -> clamped to max " + format_quantity(cfg.max);
      r.warnings.push_back("/dev/shm need " + format_human(need) + " is above the configured max; using " +
                           format_quantity(cfg.max) + " (workers may hit a bus error)");
    } else {
      r.bytes = rounded;
      e += " -> " + format_quantity(rounded);
    }
    r.explanation = std::move(e);
  } else {
    r.source = SizeSource::kDefault;
    r.bytes = cfg.default_size;
    r.need = cfg.default_size;
    std::string why;
    for (const auto& i : in.ignored) why += (why.empty() ? "" : ", ") + i;
    if (!why.empty()) why += " ignored; ";
    std::string missing;
    if (!in.batch_size) missing += "batch-size";
    if (!in.num_workers) missing += std::string(missing.empty() ? "" : "/") + "num-workers";
    if (!in.sample_size) missing += std::string(missing.empty() ? "" : "/") + "sample-size";
    r.explanation = why + "no " + missing + (missing.find('/') == std::string::npos ? " annotation" : " annotations") +
                    "; default " + format_quantity(cfg.default_size);
    if (in.memory_limit && *in.memory_limit < r.bytes) {
      r.bytes = *in.memory_limit;
      r.explanation += " capped at the pod memory limit " + format_quantity(*in.memory_limit);
    }
  }
  if (!in.ignored.empty() && r.source != SizeSource::kDefault) {
    std::string why;
    for (const auto& i : in.ignored) why += (why.empty() ? "" : ", ") + i;
    r.explanation += " (ignored: " + why + ")";
  }
  if (in.memory_limit && r.bytes > *in.memory_limit) {
    r.exceeds_memory_limit = true;
    r.warnings.push_back("/dev/shm " + format_quantity(r.bytes) + " exceeds the pod memory limit " +
                         format_human(*in.memory_limit) +
                         "; shm pages count against it, workers may be OOM-killed");
  }
  return r;
}

}  // namespace shmguard::sizing
