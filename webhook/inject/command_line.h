// What a pod's regular containers run, read from command and args (shell `-c` scripts split into
// their simple commands): which configured PyTorch launcher or trainer starts (recognition rule
// 6), and the DataLoader flags the command line states (a sizing source after the annotations).
// Pure: pod spec in, words and findings out. The tokenizer of those lines is shell_words.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shmguard::inject {

// Words of a shell command line: quotes and backslashes resolved, `;`, `&&`, `||`, `|`, `&` and
// line ends as the separator word ";", comments dropped. Enough to find a launcher's flags.
std::vector<std::string> shell_words(std::string_view line);

// One simple command a container runs: its words (env assignments and exec/env/nohup/time
// wrappers removed), the container, and the field its first word came from.
struct CommandLine {
  std::vector<std::string> words;
  const nlohmann::json* container = nullptr;
  std::string container_name;
  std::string field;  // "command" or "args"
  // Args alone (no command) that open with torchrun's options and name a script: the image's
  // entrypoint is torchrun (torchelastic's samples), so the words are its arguments from the first.
  bool entrypoint_launcher = false;
};

std::vector<CommandLine> command_lines(const nlohmann::json& spec);

// A container with args and no command whose args open with torchrun's options and name a
// script: its image's entrypoint is torchrun.
bool runs_launcher_entrypoint(const nlohmann::json& container);

// A command word's program: "/usr/local/bin/torchrun" -> "torchrun" (a view into `word`).
std::string_view program_name(std::string_view word);

// The value `flag` is given in words[from..] (`--flag N` or `--flag=N`), stopping at a ";" word
// (shell_words' separator), as written.
std::optional<std::string> flag_in(const std::vector<std::string>& words, std::size_t from, std::string_view flag);

// "$(N)", "${N}" or "$N" as the whole value, replaced by the container's literal env N (a string,
// or a number as manifests write it); anything else stays as written.
std::string expand_env(const std::string& raw, const nlohmann::json& container);

// N when `raw` is "$(N)", "${N}" or "$N" as a whole; else "".
std::string env_reference(const std::string& raw);

// The literal value of env `name` in `container` (a number as its digits); nullopt when it is
// not set there or comes from valueFrom.
std::optional<std::string> env_literal(const nlohmann::json& container, std::string_view name);

// Rule 6: "torchrun in args", "accelerate launch in command", "--num-workers 8 in args", or ""
// when no line starts a configured launcher (`launchers`: "torchrun", "python -m
// torch.distributed.run", ...) and no Python command line passes DataLoader workers above 0.
std::string launcher_rule(const std::vector<CommandLine>& lines, const std::vector<std::string>& launchers);

// An MPI launcher's containers: some line starts mpirun/mpiexec/horovodrun, and none starts a
// configured launcher or Python itself (Python started by mpirun runs on the workers).
bool runs_only_mpi(const std::vector<CommandLine>& lines, const std::vector<std::string>& launchers);

// The DataLoader settings a command line passes (--batch-size/--batch_size, --num-workers/
// --num_workers/--workers, --prefetch-factor/--prefetch_factor, Hugging Face Trainer's
// --dataloader_num_workers, --dataloader_prefetch_factor and --per_device_train_batch_size, the
// ImageNet example's -j and -b): the first Python or launcher line
// that states any of them (a sidecar's `gunicorn --workers 4` is not read).
struct LoaderFlags {
  struct Value {
    std::optional<std::uint64_t> n;
    std::string as_written;  // "--batch-size 128" (env references resolved)
  };
  Value batch_size, num_workers, prefetch_factor;
  struct FlagWarning {
    std::string text;
    std::string flag;  // as written on the command line, for the offline report's line
  };
  std::vector<FlagWarning> warnings;  // a flag whose value is not a number
};
LoaderFlags loader_flags(const std::vector<CommandLine>& lines, const std::vector<std::string>& launchers);

}  // namespace shmguard::inject
