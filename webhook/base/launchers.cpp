// The launcher table (see launchers.h).
#include "base/launchers.h"

namespace shmguard {

const std::vector<LauncherRow>& launcher_table() {
  static const std::vector<LauncherRow> table{
      {.name = "torchrun",
       .commands = {"torchrun", "python -m torch.distributed.run", "python -m torch.distributed.launch"},
       .programs = {"torchrun", "torch.distributed.run", "torch.distributed.launch", "-mtorch.distributed.run",
                    "-mtorch.distributed.launch"},
       .count_flags = {"--nproc_per_node", "--nproc-per-node"}},
      {.name = "accelerate launch",
       .commands = {"accelerate launch", "python -m accelerate.commands.launch"},
       .programs = {"accelerate", "accelerate.commands.launch", "-maccelerate.commands.launch"},
       .count_flags = {"--num_processes", "--num-processes"},
       .divisor_flags = {"--num_machines", "--num-machines"}},
      {.name = "deepspeed",
       .commands = {"deepspeed", "python -m deepspeed.launcher.runner"},
       .programs = {"deepspeed", "deepspeed.launcher.runner", "-mdeepspeed.launcher.runner"},
       .count_flags = {"--num_gpus", "--num-gpus"}},
      {.name = "dlrover-run",
       .commands = {"dlrover-run"},
       .programs = {"dlrover-run"},
       .count_flags = {"--nproc_per_node", "--nproc-per-node"}},
      {.name = "tune run", .commands = {"tune run"}},
      {.name = "axolotl", .commands = {"python -m axolotl.cli.train", "axolotl train"}},
      {.name = "composer", .commands = {"composer"}},
  };
  return table;
}

std::vector<std::string> default_launcher_commands() {
  std::vector<std::string> out;
  for (const auto& row : launcher_table())
    for (auto c : row.commands) out.emplace_back(c);
  return out;
}

}  // namespace shmguard
