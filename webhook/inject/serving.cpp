// Inference servers (see serving.h).
#include "inject/serving.h"

#include <algorithm>

#include "base/json_fields.h"
#include "base/text.h"
#include "inject/recognize.h"
#include "sizing/quantity.h"

namespace shmguard::inject {
namespace {

using nlohmann::json;

std::string image_of(const json& container) {
  const json* img = child(container, "image");
  return img && img->is_string() ? image_repository(img->get_ref<const std::string&>()) : std::string();
}

// The name of `names` that `line` runs as its program or Python module; "" when none.
std::string line_serves(const CommandLine& line, const std::vector<std::string>& names) {
  if (line.words.empty()) return "";
  const std::string_view program = program_name(line.words[0]);
  std::string_view module;
  if (program.starts_with("python"))
    for (std::size_t i = 1; i + 1 < line.words.size(); ++i)
      if (line.words[i] == "-m") {
        module = line.words[i + 1];
        module = module.substr(0, module.find('.'));
        break;
      }
  for (const auto& n : names)
    if (program == n || module == n) return n;
  return "";
}

// The name of `names` whose image a container runs; "" when none.
std::string image_serves(const json& container, const std::vector<std::string>& names) {
  const std::string repo = image_of(container);
  for (const auto& n : names)
    if (!repo.empty() && repo.find(n) != std::string::npos) return n;
  return "";
}

constexpr const char* kTpFlags[] = {"--tensor-parallel-size", "-tp", "--tp-size", "--tp", "--num-shard"};

}  // namespace

std::string serving_name(const json& spec, const std::vector<CommandLine>& lines, const std::vector<std::string>& names) {
  for (const auto& l : lines)
    if (auto n = line_serves(l, names); !n.empty()) return n;
  const json* containers = child(spec, "containers");
  if (!containers || !containers->is_array()) return "";
  for (const auto& c : *containers)
    if (auto n = image_serves(c, names); !n.empty()) return n;
  return "";
}

std::optional<TensorParallel> tensor_parallel(const json& spec, const std::vector<CommandLine>& lines,
                                              const std::vector<std::string>& names) {
  for (const auto& l : lines) {
    std::string server = line_serves(l, names);
    std::size_t from = 1;
    if (server.empty() && l.field == "args" && l.container && !child(*l.container, "command")) {
      server = image_serves(*l.container, names);  // the image's entrypoint is the server
      from = 0;
    }
    if (server.empty()) continue;
    for (const char* flag : kTpFlags) {
      auto v = flag_in(l.words, from, flag);
      if (!v) continue;
      auto n = sizing::parse_count(expand_env(*v, *l.container));
      if (!n) continue;
      return TensorParallel{*n, server + " " + flag + " " + std::to_string(*n) + " in " + l.field, l.container};
    }
  }
  // TGI reads its shard count from the environment too.
  const json* containers = child(spec, "containers");
  if (!containers || !containers->is_array()) return std::nullopt;
  for (const auto& c : *containers) {
    if (image_serves(c, names).empty()) continue;
    auto v = env_literal(c, "NUM_SHARD");
    auto n = v ? sizing::parse_count(*v) : std::nullopt;
    if (n) return TensorParallel{*n, "env NUM_SHARD " + std::to_string(*n), &c};
  }
  return std::nullopt;
}

}  // namespace shmguard::inject
