// Inference servers: which pods run one (never training by the image rule), and the tensor
// parallel degree a vLLM, SGLang or TGI command line asks for (NCCL between the ranks of one pod
// goes through /dev/shm). Pure: pod spec in, findings out.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "inject/command_line.h"

namespace shmguard::inject {

// The first of `names` a regular container serves with: its image repository contains the name,
// or a command line's program is it (`vllm serve`, `tritonserver`) or runs it as a Python module
// (`python -m vllm.entrypoints.openai.api_server`). "" when none.
std::string serving_name(const nlohmann::json& spec, const std::vector<CommandLine>& lines,
                         const std::vector<std::string>& names);

struct TensorParallel {
  std::uint64_t degree = 0;
  std::string as_written;  // "vllm --tensor-parallel-size 4 in args"
  const nlohmann::json* container = nullptr;
};

// The tensor parallel degree a serving command line passes (--tensor-parallel-size/-tp,
// --tp/--tp-size, --num-shard; TGI's NUM_SHARD env), on a line that runs one of `names` or in the
// args of a container whose image is one (its entrypoint is the server). nullopt when none says.
std::optional<TensorParallel> tensor_parallel(const nlohmann::json& spec, const std::vector<CommandLine>& lines,
                                              const std::vector<std::string>& names);

}  // namespace shmguard::inject
