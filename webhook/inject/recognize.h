// Training-pod recognition: the ordered rules of README "What shmguard does to a pod" as a pure predicate over pod JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "inject/annotations.h"

namespace shmguard::inject {

enum class Verdict { kTraining, kOptedOut, kHostIPC, kNotTraining };

struct Recognition {
  Verdict verdict = Verdict::kNotTraining;
  std::string because;  // "label training.kubeflow.org/job-name", "image pytorch/pytorch:2.4", ...
  std::vector<std::string> warnings;
  std::vector<std::string> warning_about;  // per warning: the annotation key it is about, or ""
  void warn(std::string message, std::string_view about = {}) {
    warnings.push_back(std::move(message));
    warning_about.emplace_back(about);
  }
};


// The known shmguard.io/ key closest to `key` (a typo's likely intent), or "" when none is close.
std::string closest_known_key(std::string_view key);

// `assume_training`: the caller knows the template is a training pod (Kubeflow kinds offline);
// opt-out and hostIPC still win.
Recognition recognize(const nlohmann::json& pod, const config::SelectionConfig& cfg,
                      bool assume_training = false);

// The repository part of an image reference: tag and digest removed, registry and port kept.
std::string image_repository(std::string_view image);

// Shell-style glob: '*' matches any run of characters (including '/'), '?' one character.
bool glob_match(std::string_view pattern, std::string_view text);

// Text of a label or annotation value; numbers and booleans (offline YAML) become their text.
// std::nullopt when the key is absent or the value is not a scalar.
std::optional<std::string> value_text(const nlohmann::json& map, std::string_view key);

// A JSON pointer reference token for `key` ("~" -> "~0", "/" -> "~1").
std::string escape_pointer_token(std::string_view key);

// A value safe to echo in a warning: control characters replaced, at most `max` characters.
std::string printable(std::string_view value, std::size_t max = 40);


}  // namespace shmguard::inject
