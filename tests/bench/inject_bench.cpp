// Google Benchmark: the engine on a realistic ~4 KB training pod, and the whole admission call
// (parse AdmissionReview, inject, diff, base64, serialize) on the same pod.
#include <benchmark/benchmark.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "admission/review.h"
#include "inject/inject.h"

using nlohmann::json;
using namespace shmguard;

namespace {

// hack/bench/review.json: a Kubeflow PyTorchJob worker pod as the training operator creates it
// (about 4 KB), wrapped in the AdmissionReview kube-apiserver sends. hack/bench.sh drives the
// server with the same file.
std::string review_text() {
  std::ifstream in(SHMGUARD_BENCH_REVIEW, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) throw std::runtime_error("cannot read " SHMGUARD_BENCH_REVIEW);
  return ss.str();
}

json realistic_pod() { return json::parse(review_text())["request"]["object"]; }

void BM_InjectPod(benchmark::State& state) {
  const json pod = realistic_pod();
  const config::Config cfg;
  for (auto _ : state) {
    auto r = inject::inject_pod(pod, cfg);
    benchmark::DoNotOptimize(r);
  }
  state.counters["pod_bytes"] = static_cast<double>(pod.dump().size());
}
BENCHMARK(BM_InjectPod);

void BM_HandleReview(benchmark::State& state) {
  const std::string body = review_text();
  const config::Config cfg;
  for (auto _ : state) {
    auto out = admission::handle_review(body, cfg);
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
  state.counters["review_bytes"] = static_cast<double>(body.size());
}
BENCHMARK(BM_HandleReview);

}  // namespace

BENCHMARK_MAIN();
