// What a container runs: command lines (shell scripts split, wrappers removed), the launcher rule
// (recognition rule 6), the DataLoader flags a command states, and the tokenizer under them.
#include "inject/command_line.h"

#include <gtest/gtest.h>

#include "config/config.h"

using namespace shmguard::inject;
using nlohmann::json;

namespace {

const std::vector<std::string> kDefaults = shmguard::config::SelectionConfig{}.commands;

json spec(json command, json args = nullptr, json env = nullptr) {
  json c = {{"name", "train"}, {"image", "registry.example/acme/trainer:1"}};
  if (!command.is_null()) c["command"] = std::move(command);
  if (!args.is_null()) c["args"] = std::move(args);
  if (!env.is_null()) c["env"] = std::move(env);
  return {{"containers", json::array({c})}};
}

std::string rule(const json& s) { return launcher_rule(command_lines(s), kDefaults); }

}  // namespace

TEST(CommandLines, ShellScriptsSplitIntoTheirCommandsWithWrappersRemoved) {
  auto lines = command_lines(spec({"/bin/bash", "-lc"}, {"set -e; cd /w && NCCL_DEBUG=INFO exec env A=1 nohup python3 -mfoo x"}));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].words, (std::vector<std::string>{"set", "-e"}));
  EXPECT_EQ(lines[1].words, (std::vector<std::string>{"cd", "/w"}));
  EXPECT_EQ(lines[2].words, (std::vector<std::string>{"python3", "-m", "foo", "x"}));
  EXPECT_EQ(lines[2].field, "args");
  EXPECT_EQ(lines[2].container_name, "train");
  // argv is one command line: its words are not lexed again.
  lines = command_lines(spec({"python", "train.py", "--name", "a b; c"}));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].words.back(), "a b; c");
  EXPECT_EQ(lines[0].field, "command");
  EXPECT_TRUE(command_lines(spec(nullptr)).empty());
  EXPECT_TRUE(command_lines(json::object()).empty());
  EXPECT_TRUE(command_lines({{"containers", "nope"}}).empty());
}

TEST(LauncherRule, EveryDefaultLauncher) {
  EXPECT_EQ(rule(spec({"torchrun", "--nproc-per-node=8", "train.py"})), "torchrun in command");
  EXPECT_EQ(rule(spec({"/usr/local/bin/torchrun"})), "torchrun in command");
  EXPECT_EQ(rule(spec({"python3.11"}, {"-u", "-m", "torch.distributed.run", "t.py"})),
            "python -m torch.distributed.run in command");
  EXPECT_EQ(rule(spec({"python", "-mtorch.distributed.launch", "t.py"})), "python -m torch.distributed.launch in command");
  EXPECT_EQ(rule(spec(nullptr, {"accelerate", "launch", "--num_processes", "8", "t.py"})), "accelerate launch in args");
  EXPECT_EQ(rule(spec({"deepspeed", "t.py"})), "deepspeed in command");
  EXPECT_EQ(rule(spec({"sh", "-c", "dlrover-run --nproc_per_node=2 t.py"})), "dlrover-run in command");
  EXPECT_EQ(rule(spec({"tune", "run", "lora_finetune_single_device", "--config", "c.yaml"})), "tune run in command");
  EXPECT_EQ(rule(spec({"bash", "-c"}, {"python -m axolotl.cli.train cfg.yaml"})), "python -m axolotl.cli.train in args");
  EXPECT_EQ(rule(spec({"axolotl", "train", "cfg.yaml"})), "axolotl train in command");
  EXPECT_EQ(rule(spec({"composer", "-n", "8", "t.py"})), "composer in command");
  // The modules the two launchers' commands run (coreweave's DreamBooth and finetuner workflows).
  EXPECT_EQ(rule(spec({"python3", "-m", "accelerate.commands.launch", "--num_processes", "1", "t.py"})),
            "python -m accelerate.commands.launch in command");
  EXPECT_EQ(rule(spec({"bash", "-c"}, {"python3 -m deepspeed.launcher.runner --num_gpus 8 t.py"})),
            "python -m deepspeed.launcher.runner in args");
}

TEST(CommandLines, ADoubleDashAfterDashCEndsTheShellsOptions) {
  // KubeRay's samples: command ["/bin/bash", "-lc", "--"], the script in args.
  auto lines = command_lines(spec({"/bin/bash", "-lc", "--"}, {"ulimit -n 65536; torchrun --nproc_per_node 2 t.py"}));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].words[0], "torchrun");
  EXPECT_EQ(lines[1].field, "args");
  EXPECT_EQ(rule(spec({"sh", "-c", "--", "torchrun t.py"})), "torchrun in command");
  // `--` and nothing after it: no script, and nothing read past the end.
  EXPECT_EQ(rule(spec({"bash", "-c", "--"})), "");
}

TEST(LauncherRule, DataLoaderWorkersOnAPythonLine) {
  EXPECT_EQ(rule(spec({"python", "t.py", "--num-workers=4"})), "--num-workers 4 in command");
  EXPECT_EQ(rule(spec({"python3", "t.py", "--num_workers", "$(W)"}, nullptr, json::array({{{"name", "W"}, {"value", "6"}}}))),
            "--num_workers 6 in command");
  EXPECT_EQ(rule(spec({"python", "t.py", "--workers", "2"})), "--workers 2 in command");
  // Zero workers load in the main process: no /dev/shm traffic. Not a number: not a rule.
  EXPECT_EQ(rule(spec({"python", "t.py", "--num-workers=0"})), "");
  EXPECT_EQ(rule(spec({"python", "t.py", "--num-workers", "$(UNSET)"})), "");
  // Not Python, not a launcher: a web server's workers.
  EXPECT_EQ(rule(spec({"gunicorn", "--workers", "4", "app:app"})), "");
  EXPECT_EQ(rule(spec({"pythonic-tool", "--workers", "4"})), "");
  // Look-alikes are not launchers.
  EXPECT_EQ(rule(spec({"python", "serve.py", "--port", "80"})), "");
  EXPECT_EQ(rule(spec({"echo", "torchrun"})), "");
  EXPECT_EQ(rule(spec({"accelerate", "config"})), "");
}

TEST(LauncherRule, TheListIsConfiguration) {
  const std::vector<std::string> mine{"nemo-run", "python -m mylab.train"};
  EXPECT_EQ(launcher_rule(command_lines(spec({"nemo-run", "x"})), mine), "nemo-run in command");
  EXPECT_EQ(launcher_rule(command_lines(spec({"python", "-m", "mylab.train"})), mine), "python -m mylab.train in command");
  EXPECT_EQ(launcher_rule(command_lines(spec({"torchrun", "t.py"})), mine), "");
}

TEST(LauncherRule, AReloadedListIsReadAgain) {
  // The split of the configured list is kept between pods; a config with another list (a reload,
  // or another config in the same thread) must not see the old one's.
  const auto torchrun = command_lines(spec({"torchrun", "t.py"}));
  std::vector<std::string> list{"torchrun"};
  EXPECT_EQ(launcher_rule(torchrun, list), "torchrun in command");
  list = {"deepspeed"};  // same vector, new contents
  EXPECT_EQ(launcher_rule(torchrun, list), "");
  EXPECT_TRUE(runs_only_mpi(command_lines(spec({"sh", "-c", "mpirun -np 2 hostname; torchrun t.py"})), list));
  EXPECT_EQ(launcher_rule(torchrun, kDefaults), "torchrun in command");
  EXPECT_FALSE(runs_only_mpi(command_lines(spec({"sh", "-c", "mpirun -np 2 hostname; torchrun t.py"})), kDefaults));
  EXPECT_EQ(launcher_rule(torchrun, {}), "");
}

TEST(LoaderFlags, BothSpellingsBothFormsFirstLineThatStatesThem) {
  auto f = loader_flags(command_lines(spec({"sh", "-c", "pip install x; torchrun t.py --batch_size=32 --num-workers 8 "
                                                            "--prefetch_factor $(P)"},
                                           nullptr, json::array({{{"name", "P"}, {"value", "4"}}}))),
                        kDefaults);
  EXPECT_EQ(f.batch_size.n, 32u);
  EXPECT_EQ(f.batch_size.as_written, "--batch_size 32");
  EXPECT_EQ(f.num_workers.n, 8u);
  EXPECT_EQ(f.prefetch_factor.n, 4u);
  EXPECT_EQ(f.prefetch_factor.as_written, "--prefetch_factor 4");
  EXPECT_TRUE(f.warnings.empty());
  f = loader_flags(command_lines(spec({"python", "t.py", "--batch-size", "big"})), kDefaults);
  EXPECT_FALSE(f.batch_size.n);
  ASSERT_EQ(f.warnings.size(), 1u);
  EXPECT_EQ(f.warnings[0].text, "--batch-size \"big\" in container train is not a whole number; not used for sizing");
  EXPECT_EQ(f.warnings[0].flag, "--batch-size");
  // A sidecar's flags are not a DataLoader's.
  f = loader_flags(command_lines(spec({"gunicorn", "--workers", "4"})), kDefaults);
  EXPECT_FALSE(f.num_workers.n);
}

TEST(ExpandEnv, WholeValueReferencesOnly) {
  const json c = {{"env", json::array({{{"name", "N"}, {"value", "3"}}, {{"name", "F"}, {"valueFrom", json::object()}}})}};
  EXPECT_EQ(expand_env("$(N)", c), "3");
  EXPECT_EQ(expand_env("${N}", c), "3");
  EXPECT_EQ(expand_env("$N", c), "3");
  EXPECT_EQ(expand_env("$(F)", c), "$(F)");
  EXPECT_EQ(expand_env("x$(N)", c), "x$(N)");
  EXPECT_EQ(expand_env("$(N", c), "$(N");
}

TEST(LoaderFlags, HuggingFaceTrainerAndImageNetShortFlags) {
  auto f = loader_flags(command_lines(spec({"accelerate", "launch", "train.py", "--per_device_train_batch_size", "16",
                                            "--dataloader_num_workers=8", "--dataloader_prefetch_factor", "3"})),
                        kDefaults);
  EXPECT_EQ(f.batch_size.as_written, "--per_device_train_batch_size 16");
  EXPECT_EQ(f.num_workers.as_written, "--dataloader_num_workers 8");
  EXPECT_EQ(f.prefetch_factor.n, 3u);
  f = loader_flags(command_lines(spec({"python", "train.py", "--dataloader-num-workers", "4"})), kDefaults);
  EXPECT_EQ(f.num_workers.n, 4u);
  // PyTorch's ImageNet example: -j N / -jN and -b N, on Python lines only.
  f = loader_flags(command_lines(spec({"python", "main.py", "-a", "resnet50", "-j8", "-b", "128"})), kDefaults);
  EXPECT_EQ(f.num_workers.as_written, "-j 8");
  EXPECT_EQ(f.batch_size.as_written, "-b 128");
  EXPECT_TRUE(f.warnings.empty());
  f = loader_flags(command_lines(spec({"make", "-j", "8"})), kDefaults);
  EXPECT_FALSE(f.num_workers.n);
  // Python's own -b (bytes warnings) is not a batch size, and is no warning either.
  f = loader_flags(command_lines(spec({"python", "-b", "main.py", "--workers", "2"})), kDefaults);
  EXPECT_FALSE(f.batch_size.n);
  EXPECT_TRUE(f.warnings.empty());
  EXPECT_EQ(rule(spec({"python", "main.py", "-j", "8"})), "-j 8 in command");
  EXPECT_EQ(rule(spec({"python3", "run.py", "--dataloader_num_workers=2"})), "--dataloader_num_workers 2 in command");
  EXPECT_EQ(rule(spec({"make", "-j", "8"})), "");
}

TEST(LauncherRule, ArgsOnlyContainersOfATorchrunEntrypoint) {
  // torchelastic's own sample: the image's entrypoint is torchrun, the args its flags and a script.
  const json s = spec(nullptr, {"--nproc_per_node=8", "/workspace/main.py", "--batch-size=32", "--workers=4"});
  EXPECT_EQ(rule(s), "torchrun (image entrypoint) in args");
  auto f = loader_flags(command_lines(s), kDefaults);
  EXPECT_EQ(f.batch_size.n, 32u);
  EXPECT_EQ(f.num_workers.n, 4u);
  EXPECT_TRUE(runs_launcher_entrypoint(s["containers"][0]));
  // Flags that are not torchrun's, or no script, or a command: not an entrypoint launcher.
  EXPECT_EQ(rule(spec(nullptr, {"--port=8080", "app.py"})), "");
  EXPECT_EQ(rule(spec(nullptr, {"--nnodes=2"})), "");
  EXPECT_FALSE(runs_launcher_entrypoint(spec({"python"}, {"--nnodes=2", "t.py"})["containers"][0]));
}

TEST(ExpandEnv, NumbersAsManifestsWriteThemAndUnsetNames) {
  const json c = {{"env", json::array({{{"name", "N"}, {"value", 4}}, {{"name", "S"}, {"value", "x"}}})}};
  EXPECT_EQ(expand_env("${N}", c), "4");
  EXPECT_EQ(expand_env("$(N)", c), "4");
  EXPECT_EQ(expand_env("$N", c), "4");
  EXPECT_EQ(expand_env("${MISSING}", c), "${MISSING}");
  EXPECT_EQ(env_reference("${MISSING}"), "MISSING");
  EXPECT_EQ(env_reference("$((N * 2))"), "");
  EXPECT_EQ(env_reference("8"), "");
  EXPECT_EQ(env_literal(c, "S"), "x");
  EXPECT_FALSE(env_literal(c, "MISSING"));
}

TEST(ShellWords, QuotesSeparatorsAndContinuations) {
  using V = std::vector<std::string>;
  EXPECT_EQ(shell_words("pip install -r 'req s.txt' && torchrun --nproc_per_node=8 \"a b\".py"),
            (V{"pip", "install", "-r", "req s.txt", ";", "torchrun", "--nproc_per_node=8", "a b.py"}));
  EXPECT_EQ(shell_words("torchrun \\\n  --nproc-per-node 4 x.py # --nproc-per-node 9\nnext"),
            (V{"torchrun", "--nproc-per-node", "4", "x.py", ";", "next"}));
  EXPECT_EQ(shell_words("a;b|c||d"), (V{"a", ";", "b", ";", "c", ";", "d"}));
  EXPECT_EQ(shell_words(""), V{});
  EXPECT_EQ(shell_words("'unterminated"), V{"unterminated"});
}
