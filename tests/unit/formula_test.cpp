// The sizing formula: the arithmetic of docs/sizing.md, clamps, defaults and warnings.
#include "sizing/formula.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace shmguard;
using namespace shmguard::sizing;

namespace {
SizingInput loader(std::uint64_t batch, std::uint64_t workers, std::uint64_t sample) {
  SizingInput in;
  in.batch_size = batch;
  in.num_workers = workers;
  in.sample_size = sample;
  return in;
}
// The formula written out independently, in floating point, for cross-checking.
std::uint64_t reference(double batch, double workers, double sample, double prefetch, double procs) {
  double b = batch * sample;
  double l = (workers * prefetch + 2) * b;
  double need = procs * l * 1.5 + (procs > 1 ? procs * 64.0 * kMi : 0) + 256.0 * kMi;
  double mi = std::ceil(need / kMi);
  double size = std::clamp(mi * kMi, 1.0 * kGi, 64.0 * kGi);
  return static_cast<std::uint64_t>(size);
}
}  // namespace

TEST(Formula, DesignTableRowsHitTheMinimum) {
  sizing::Params cfg;
  // 64 x 256Ki, 8 workers, prefetch 2: (16+2) x 16Mi = 288Mi; x1.5 + 256Mi = 688Mi -> min 1Gi.
  auto r = compute_size(loader(64, 8, 256 * kKi), cfg);
  EXPECT_EQ(r.source, SizeSource::kFormula);
  EXPECT_EQ(r.need, 688 * kMi);
  EXPECT_EQ(r.bytes, kGi);
  EXPECT_NE(r.explanation.find("688Mi"), std::string::npos) << r.explanation;
}

TEST(Formula, PrefetchFourAboveMinimum) {
  sizing::Params cfg;
  auto in = loader(32, 4, kMi);
  in.prefetch_factor = 4;
  auto r = compute_size(in, cfg);
  // (4x4+2) x 32Mi = 576Mi; x1.5 = 864Mi; + 256Mi = 1120Mi.
  EXPECT_EQ(r.bytes, 1120 * kMi);
  EXPECT_EQ(format_quantity(r.bytes), "1120Mi");
}

TEST(Formula, SeveralProcessesAddNccl) {
  sizing::Params cfg;
  auto in = loader(32, 8, 588 * kKi);
  in.procs = 8;
  auto r = compute_size(in, cfg);
  EXPECT_EQ(r.bytes, 4737 * kMi);
  EXPECT_NE(r.explanation.find("nccl 8 x 64Mi"), std::string::npos) << r.explanation;
}

TEST(Formula, MatchesAnIndependentReferenceToTheMiB) {
  sizing::Params cfg;
  for (std::uint64_t batch : {1, 16, 64, 256})
    for (std::uint64_t workers : {0, 1, 4, 16})
      for (std::uint64_t sample : std::initializer_list<std::uint64_t>{1000, 150 * kKi, 3 * kMi})
        for (std::uint64_t prefetch : {1, 2, 6})
          for (std::uint64_t procs : {1, 2, 8}) {
            auto in = loader(batch, workers, sample);
            in.prefetch_factor = prefetch;
            in.procs = procs;
            auto r = compute_size(in, cfg);
            EXPECT_EQ(r.bytes, reference(double(batch), double(workers), double(sample), double(prefetch),
                                         double(procs)))
                << batch << " " << workers << " " << sample << " " << prefetch << " " << procs;
            EXPECT_EQ(r.bytes % kMi, 0u);
          }
}

TEST(Formula, ClampsToMaxWithWarning) {
  sizing::Params cfg;
  auto r = compute_size(loader(1024, 32, 8 * kMi), cfg);
  EXPECT_EQ(r.bytes, 64 * kGi);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("max"), std::string::npos);
}

TEST(Formula, AbsurdValuesSaturateAtMax) {
  sizing::Params cfg;
  auto in = loader(1ULL << 62, 1ULL << 62, 1ULL << 62);
  in.procs = 1ULL << 40;
  auto r = compute_size(in, cfg);
  EXPECT_EQ(r.bytes, cfg.max);
  ASSERT_FALSE(r.warnings.empty());
  EXPECT_NE(r.warnings[0].find("overflow"), std::string::npos);
}

TEST(Formula, DefaultWithoutAllThreeInputs) {
  sizing::Params cfg;
  SizingInput in;
  in.batch_size = 32;
  in.num_workers = 4;  // no sample size
  auto r = compute_size(in, cfg);
  EXPECT_EQ(r.source, SizeSource::kDefault);
  EXPECT_EQ(r.bytes, 8 * kGi);
  // (8Gi - 256Mi) / (10 x 32 samples x 1.5) = 17336456 bytes: 16930Ki.
  EXPECT_EQ(r.warnings, std::vector<std::string>{
                            "4 workers x prefetch 2 + 2 = 10 batches of 32 = 320 samples in flight per process; by the "
                            "formula 8Gi holds samples up to 16930Ki; set shmguard.io/sample-size"});
}

TEST(Formula, SamplesInFlightTheIssueExample) {
  // The Dataflux job: --num-workers=32 --prefetch-factor=5 --batch-size=128, 3 MB samples.
  sizing::Params cfg;
  SizingInput in;
  in.batch_size = 128;
  in.num_workers = 32;
  in.prefetch_factor = 5;
  auto r = compute_size(in, cfg);
  EXPECT_EQ(r.bytes, 8 * kGi);
  EXPECT_EQ(r.warnings, std::vector<std::string>{
                            "32 workers x prefetch 5 + 2 = 162 batches of 128 = 20736 samples in flight per process; "
                            "by the formula 8Gi holds samples up to 261Ki; set shmguard.io/sample-size"});
  // Four processes share it, with NCCL's part: (8Gi - 256Mi - 4 x 64Mi) / (4 x 20736 x 1.5) = 63Ki.
  in.procs = 4;
  r = compute_size(in, cfg);
  EXPECT_EQ(r.warnings.at(0), "32 workers x prefetch 5 + 2 = 162 batches of 128 = 20736 samples in flight per process "
                              "(4 processes); by the formula 8Gi holds samples up to 63Ki; set shmguard.io/sample-size");
  // Under a memory limit the default is capped and the hint uses what is really mounted.
  in.procs = 1;
  in.memory_limit = 256 * kMi;
  r = compute_size(in, cfg);
  EXPECT_EQ(r.bytes, 256 * kMi);
  EXPECT_EQ(r.warnings.at(0), "32 workers x prefetch 5 + 2 = 162 batches of 128 = 20736 samples in flight per process; "
                              "by the formula 256Mi leaves no room for samples that large; set shmguard.io/sample-size");
}

TEST(Formula, DefaultNeverAboveMemoryLimit) {
  sizing::Params cfg;
  SizingInput in;
  in.memory_limit = 3 * kGi;
  auto r = compute_size(in, cfg);
  EXPECT_EQ(r.bytes, 3 * kGi);
  EXPECT_FALSE(r.exceeds_memory_limit);
  EXPECT_TRUE(r.warnings.empty());
}

TEST(Formula, ExplicitSizeWinsAndClamps) {
  sizing::Params cfg;
  auto in = loader(32, 4, kMi);
  in.explicit_size = 16 * kGi;
  auto r = compute_size(in, cfg);
  EXPECT_EQ(r.source, SizeSource::kExplicit);
  EXPECT_EQ(r.bytes, 16 * kGi);
  in.explicit_size = 100 * kGi;
  r = compute_size(in, cfg);
  EXPECT_EQ(r.bytes, 64 * kGi);
  ASSERT_EQ(r.warnings.size(), 1u);
  in.explicit_size = 100 * kMi;  // below min: the user knows best
  EXPECT_EQ(compute_size(in, cfg).bytes, 100 * kMi);
}

TEST(Formula, WarnsAboveMemoryLimit) {
  sizing::Params cfg;
  auto in = loader(32, 4, kMi);
  in.prefetch_factor = 4;
  in.memory_limit = 512 * kMi;
  auto r = compute_size(in, cfg);
  EXPECT_TRUE(r.exceeds_memory_limit);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("memory limit"), std::string::npos);
}

TEST(Formula, ConfigChangesConstants) {
  sizing::Params cfg;
  cfg.headroom_milli = 2000;
  cfg.base = 0;
  cfg.min = kMi;
  auto r = compute_size(loader(10, 0, kMi), cfg);
  EXPECT_EQ(r.bytes, 40 * kMi);  // (0+2) x 10Mi x 2
}
