// Process count per pod: every source, its priority, and the values that give no number.
#include "inject/procs.h"

#include <gtest/gtest.h>

#include "config/config.h"

using namespace shmguard::inject;
using nlohmann::json;

namespace {

const std::vector<std::string> kAcc = shmguard::config::SelectionConfig{}.accelerators;

json container(json extra = json::object()) {
  json c = {{"name", "train"}, {"image", "pytorch/pytorch"}};
  c.update(extra);
  return c;
}

json spec_of(json c) { return {{"containers", json::array({std::move(c)})}}; }

json env(const char* name, const char* value) { return {{"name", name}, {"value", value}}; }

bool has_warning(const ProcsCount& p, const std::string& text) {
  for (const auto& w : p.warnings)
    if (w.find(text) != std::string::npos) return true;
  return false;
}

TEST(Procs, DefaultIsOneWithNoSource) {
  auto p = count_procs(spec_of(container()), std::nullopt, std::nullopt, kAcc);
  EXPECT_EQ(p.count, 1u);
  EXPECT_EQ(p.source, "");
  EXPECT_TRUE(p.warnings.empty());
}

TEST(Procs, TorchrunFlagForms) {
  struct Case {
    json c;
    std::uint64_t want;
    const char* source;
  } cases[] = {
      {{{"command", {"torchrun", "--nproc_per_node", "4", "train.py"}}}, 4, "torchrun --nproc_per_node"},
      {{{"command", {"torchrun", "--nproc-per-node=6", "train.py"}}}, 6, "torchrun --nproc-per-node"},
      {{{"command", {"/opt/conda/bin/torchrun"}}, {"args", {"--standalone", "--nproc_per_node=2", "t.py"}}},
       2,
       "torchrun --nproc_per_node"},
      {{{"command", {"python3", "-m", "torch.distributed.run", "--nproc_per_node", "3", "t.py"}}}, 3,
       "torchrun --nproc_per_node"},
      {{{"command", {"python", "-m", "torch.distributed.launch", "--nproc_per_node=5", "t.py"}}}, 5,
       "torchrun --nproc_per_node"},
      // A shell string, the script's own flag of the same name after a separator is not torchrun's.
      {{{"command", {"sh", "-c", "pip install x && torchrun --nproc_per_node=8 t.py; python t.py --nproc_per_node 99"}}},
       8,
       "torchrun --nproc_per_node"},
      // $(VAR) from the container's literal env.
      {{{"command", {"torchrun", "--nproc_per_node", "$(N)", "t.py"}}, {"env", {env("N", "7")}}}, 7,
       "torchrun --nproc_per_node"},
      // The launchers' modules under python -m count as the launchers themselves.
      {{{"command", {"python3", "-m", "accelerate.commands.launch", "--num_processes", "4", "t.py"}}}, 4,
       "accelerate launch --num_processes"},
      {{{"command", {"bash", "-c", "python3 -m deepspeed.launcher.runner --num_gpus 2 t.py"}}}, 2,
       "deepspeed --num_gpus"},
  };
  for (const auto& c : cases) {
    auto p = count_procs(spec_of(container(c.c)), std::nullopt, std::nullopt, kAcc);
    EXPECT_EQ(p.count, c.want) << c.c.dump();
    EXPECT_EQ(p.source, c.source) << c.c.dump();
    EXPECT_TRUE(p.warnings.empty()) << c.c.dump();
  }
  // No flag: torchrun's own default (1, or the env) decides.
  auto p = count_procs(spec_of(container({{"command", {"torchrun", "t.py"}}})), std::nullopt, std::nullopt, kAcc);
  EXPECT_EQ(p.count, 1u);
}

TEST(Procs, EnvOwnerAndGpus) {
  auto p = count_procs(spec_of(container({{"env", {env("PET_NPROC_PER_NODE", "4")}}})), std::nullopt, std::nullopt, kAcc);
  EXPECT_EQ(p.count, 4u);
  EXPECT_EQ(p.source, "PET_NPROC_PER_NODE");

  OwnerProcs owner{"PyTorchJob spec.nprocPerNode", "2"};
  p = count_procs(spec_of(container()), std::nullopt, owner, kAcc);
  EXPECT_EQ(p.count, 2u);
  EXPECT_EQ(p.source, "PyTorchJob spec.nprocPerNode");

  json gpu = {{"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}}}};
  p = count_procs(spec_of(container(gpu)), std::nullopt, std::nullopt, kAcc);
  EXPECT_EQ(p.count, 8u);
  EXPECT_EQ(p.source, "nvidia.com/gpu limit");

  // "gpu" and "auto" mean the GPU limit when there is one.
  for (const char* v : {"gpu", "auto"}) {
    json c = gpu;
    c["env"] = {env("PET_NPROC_PER_NODE", v)};
    p = count_procs(spec_of(container(c)), std::nullopt, std::nullopt, kAcc);
    EXPECT_EQ(p.count, 8u) << v;
    EXPECT_EQ(p.source, std::string("PET_NPROC_PER_NODE ") + v + " (the GPU limit)") << v;
    EXPECT_TRUE(p.warnings.empty()) << v;
  }
}

TEST(Procs, PriorityAndDisagreement) {
  // annotation > torchrun flag > PET_NPROC_PER_NODE > owner > GPUs: torchrun's flag overrides the
  // env (its argparse takes the env only as the default).
  json c = {{"command", {"torchrun", "--nproc_per_node=7", "t.py"}},
            {"env", {env("PET_NPROC_PER_NODE", "2")}},
            {"resources", {{"limits", {{"nvidia.com/gpu", "4"}}}}}};
  OwnerProcs owner{"PyTorchJob spec.nprocPerNode", "3"};
  auto p = count_procs(spec_of(container(c)), 3, owner, kAcc);
  EXPECT_EQ(p.count, 3u);
  EXPECT_EQ(p.source, "shmguard.io/procs-per-pod");
  // Lower sources asking for more than the annotation are named.
  EXPECT_TRUE(has_warning(p, "torchrun --nproc_per_node 7 in container train starts more processes than "
                             "shmguard.io/procs-per-pod 3"));
  EXPECT_TRUE(has_warning(p, "nvidia.com/gpu limit 4"));
  EXPECT_FALSE(has_warning(p, "PET_NPROC_PER_NODE"));  // 2 < 3: no risk, no noise

  p = count_procs(spec_of(container(c)), std::nullopt, owner, kAcc);
  EXPECT_EQ(p.count, 7u);
  EXPECT_EQ(p.source, "torchrun --nproc_per_node");
  EXPECT_TRUE(p.warnings.empty());

  c.erase("command");
  p = count_procs(spec_of(container(c)), std::nullopt, owner, kAcc);
  EXPECT_EQ(p.count, 2u);
  EXPECT_EQ(p.source, "PET_NPROC_PER_NODE");
  EXPECT_TRUE(has_warning(p, "PyTorchJob spec.nprocPerNode 3 starts more processes"));
}

TEST(Procs, ValuesWithoutANumberWarnAndFallThrough) {
  struct Case {
    json c;
    const char* warning;
  } cases[] = {
      {{{"env", {env("PET_NPROC_PER_NODE", "auto")}}}, "PET_NPROC_PER_NODE \"auto\" in container train on a pod without GPUs"},
      {{{"env", {env("PET_NPROC_PER_NODE", "cpu")}}}, "one process per CPU of the node"},
      {{{"env", {env("PET_NPROC_PER_NODE", "gpu")}}}, "the pod has no accelerator limit"},
      {{{"env", {env("PET_NPROC_PER_NODE", "0")}}}, "must be at least 1"},
      {{{"env", {{{"name", "PET_NPROC_PER_NODE"}, {"valueFrom", {{"configMapKeyRef", {{"name", "x"}}}}}}}}},
       "comes from valueFrom"},
      {{{"command", {"torchrun", "--nproc_per_node=$CPU_PER_NODE", "t.py"}}},
       "torchrun --nproc_per_node \"$CPU_PER_NODE\" in container train is the variable CPU_PER_NODE, which the "
       "container's env does not set to a value"},
      {{{"command", {"torchrun", "--nproc_per_node", "$(N)", "t.py"}}}, "\"$(N)\" in container train is the variable N"},
      {{{"resources", {{"limits", {{"nvidia.com/gpu", "$GPU_PER_NODE"}}}}}},
       "nvidia.com/gpu limit \"$GPU_PER_NODE\" in container train is not a number"},
  };
  for (const auto& c : cases) {
    auto p = count_procs(spec_of(container(c.c)), std::nullopt, std::nullopt, kAcc);
    EXPECT_EQ(p.count, 1u) << c.c.dump();
    EXPECT_EQ(p.source, "") << c.c.dump();
    EXPECT_TRUE(has_warning(p, c.warning)) << c.c.dump() << " -> " << (p.warnings.empty() ? "" : p.warnings[0]);
    EXPECT_TRUE(has_warning(p, "set shmguard.io/procs-per-pod")) << c.c.dump();
    EXPECT_EQ(p.unresolved.size(), 1u) << c.c.dump();
  }
  // An unknown source gives way to the next one that knows.
  json c = {{"env", {env("PET_NPROC_PER_NODE", "cpu")}}};
  auto p = count_procs(spec_of(container(c)), std::nullopt, OwnerProcs{"PyTorchJob spec.nprocPerNode", "2"}, kAcc);
  EXPECT_EQ(p.count, 2u);
  EXPECT_EQ(p.warnings.size(), 1u);
}

}  // namespace

TEST(CountProcs, AcceleratorsOfEveryConfiguredName) {
  auto limits = [](json l) { return spec_of(container({{"resources", {{"limits", l}}}})); };
  auto p = count_procs(limits({{"nvidia.com/a40", "2"}}), std::nullopt, std::nullopt, kAcc);
  EXPECT_EQ(p.count, 2u);
  EXPECT_EQ(p.source, "nvidia.com/a40 limit");
  p = count_procs(limits({{"nvidia.com/mig-1g.10gb", 1}, {"cpu", "8"}}), std::nullopt, std::nullopt, kAcc);
  EXPECT_EQ(p.count, 1u);
  for (const char* r : {"amd.com/gpu", "habana.ai/gaudi", "aws.amazon.com/neuroncore", "gpu.intel.com/i915"}) {
    p = count_procs(limits({{r, "4"}}), std::nullopt, std::nullopt, kAcc);
    EXPECT_EQ(p.count, 4u) << r;
    EXPECT_EQ(p.source, std::string(r) + " limit");
  }
  p = count_procs(limits({{"example.com/fpga", "4"}}), std::nullopt, std::nullopt, kAcc);
  EXPECT_EQ(p.count, 1u);
  EXPECT_EQ(p.source, "");
  // A list without the glob counts only what it names.
  p = count_procs(limits({{"nvidia.com/a40", "2"}}), std::nullopt, std::nullopt, {"nvidia.com/gpu"});
  EXPECT_EQ(p.count, 1u);
  p = count_procs(limits({{"amd.com/gpu", "x"}}), std::nullopt, std::nullopt, kAcc);
  EXPECT_TRUE(has_warning(p, "amd.com/gpu limit \"x\" in container train is not a number")) << p.warnings[0];
}

TEST(CountProcs, LauncherVariablesWhateverTheirYamlTypeAndUnsetOnesSaid) {
  json c = container({{"command", {"torchrun", "--nproc_per_node=${NPROC_PER_NODE}", "t.py"}},
                      {"env", json::array({{{"name", "NPROC_PER_NODE"}, {"value", 4}}})},
                      {"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}}}});
  auto p = count_procs(spec_of(c), std::nullopt, std::nullopt, kAcc);
  EXPECT_EQ(p.count, 4u);
  EXPECT_EQ(p.source, "torchrun --nproc_per_node");
  c["env"] = json::array();
  p = count_procs(spec_of(c), std::nullopt, std::nullopt, kAcc);
  EXPECT_EQ(p.count, 8u);  // the GPU limit, and said why
  ASSERT_EQ(p.notices.size(), 1u);
  EXPECT_NE(p.notices[0].find("is the variable NPROC_PER_NODE, which the container's env does not set"),
            std::string::npos) << p.notices[0];
  // PET_NPROC_PER_NODE written as a YAML integer.
  p = count_procs(spec_of(container({{"env", json::array({{{"name", "PET_NPROC_PER_NODE"}, {"value", 2}}})}})),
                  std::nullopt, std::nullopt, kAcc);
  EXPECT_EQ(p.count, 2u);
  // torchrun as the image's entrypoint.
  p = count_procs(spec_of(container({{"args", {"--nproc_per_node=8", "main.py"}}})), std::nullopt, std::nullopt, kAcc);
  EXPECT_EQ(p.count, 8u);
  EXPECT_EQ(p.source, "torchrun --nproc_per_node");
}
