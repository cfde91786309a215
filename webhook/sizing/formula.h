// The /dev/shm sizing formula of docs/sizing.md "How the size is computed": DataLoader parameters -> sizeLimit, with the arithmetic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sizing/quantity.h"

namespace shmguard::sizing {

// The formula's parameters (docs/sizing.md "How the size is computed"); the config file sets them.
struct Params {
  std::uint64_t prefetch_factor = 2;
  std::uint32_t headroom_milli = 1500;  // headroom x1000, kept integral so sizes are exact
  std::uint64_t base = 256 * kMi;
  std::uint64_t nccl_per_process = 64 * kMi;
  std::uint64_t min = 1 * kGi;
  std::uint64_t max = 64 * kGi;
  std::uint64_t default_size = 8 * kGi;
};

// The headroom as a decimal ("1.5"), for explanations.
std::string headroom_text(std::uint32_t headroom_milli);

// `bytes` x the headroom, rounded up to a whole byte, saturating in `s`: the formula applies it to
// the loaders' bytes, `observe` to a measured peak.
std::uint64_t with_headroom(Saturating& s, std::uint64_t bytes, std::uint32_t headroom_milli);

// The /dev/shm size that holds a measured `peak`: the peak with the headroom, rounded up to a MiB,
// at least `min` (what `observe` and `top` propose as shmguard.io/size).
std::uint64_t size_for_peak(std::uint64_t peak, const Params& cfg);

struct SizingInput {
  std::optional<std::uint64_t> batch_size;
  std::optional<std::uint64_t> num_workers;
  std::optional<std::uint64_t> sample_size;      // bytes
  std::optional<std::uint64_t> prefetch_factor;  // default from config
  std::optional<std::uint64_t> procs;            // default 1
  std::optional<std::uint64_t> explicit_size;    // bytes; wins over the formula
  // bytes: an inference server with tensor parallel ranks in the pod (config inference.size)
  std::optional<std::uint64_t> inference_size;
  std::uint64_t tensor_parallel = 0;  // with inference_size: the degree, for the text
  std::optional<std::uint64_t> memory_limit;     // bytes; the pod's, when it has one
  // What gave `procs` ("PET_NPROC_PER_NODE", "nvidia.com/gpu limit"); "" for the default. With
  // `procs_unknown` (sources that gave no number), for the explanation only.
  std::string procs_source;
  std::vector<std::string> procs_unknown;
  // Annotations that were present but invalid, as "batch-size \"abc\" (not a whole number)":
  // the explanation says they were ignored.
  std::vector<std::string> ignored;
  // Where inputs came from besides the annotations ("from the command: --batch-size 128", "recognised
  // by: torchrun in args"): appended to the explanation in parentheses.
  std::vector<std::string> notes;
};

enum class SizeSource { kFormula, kExplicit, kDefault, kInference };

// Why `bytes` differs from what was asked for.
enum class Bound { kNone, kMin, kMax, kMemoryLimit, kSaturated };

// The formula's terms (docs/sizing.md "How the size is computed"), in saturating 62-bit integers.
struct FormulaTerms {
  std::uint64_t prefetch = 0;  // the annotation's, else the config's
  std::uint64_t batch = 0;     // batch x sample bytes
  std::uint64_t loader = 0;    // (workers x prefetch + 2) x batch
  std::uint64_t nccl = 0;      // procs x nccl_per_process when procs > 1
  std::uint64_t rounded = 0;   // need rounded up to a MiB
  bool overflow = false;
};

// With batch and workers known but no sample size: what the default holds.
struct InFlight {
  std::uint64_t prefetch = 0;
  std::uint64_t batches = 0;         // workers x prefetch + 2
  std::uint64_t samples = 0;         // batches x batch size, per process
  std::uint64_t largest_sample = 0;  // the largest sample the size holds by the formula, in whole KiB (0: none)
};

struct SizingResult {
  std::uint64_t bytes = 0;     // the sizeLimit to set
  std::uint64_t need = 0;      // what the formula asked for before rounding and clamping
  SizeSource source = SizeSource::kDefault;
  Bound bound = Bound::kNone;  // why bytes is not need (the memory limit: a default capped at it)
  bool exceeds_memory_limit = false;
  std::uint64_t procs = 1;     // the process count found (the formula's; also given with a default or explicit size)
  std::string procs_source;    // what gave it; "" for the default
  std::optional<FormulaTerms> terms;   // kFormula
  std::optional<InFlight> in_flight;   // kDefault with batch-size and num-workers but no sample-size
  // Rendered from the numbers above by describe(): one line of arithmetic, then the warnings.
  std::string explanation;
  std::vector<std::string> warnings;
};

// The arithmetic alone: every number of the result, no text.
SizingResult size_of(const SizingInput& in, const Params& cfg);

// The explanation and warnings of `r` (a size_of() result for `in` and `cfg`), from its numbers.
void describe(SizingResult& r, const SizingInput& in, const Params& cfg);

// True when the three annotations that drive the formula are all present.
bool has_formula_inputs(const SizingInput& in);

// size_of(), then describe().
SizingResult compute_size(const SizingInput& in, const Params& cfg);

}  // namespace shmguard::sizing
