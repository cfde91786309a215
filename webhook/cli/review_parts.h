// What `shmguard review`'s two ways of asking share (review_command.cpp asks the webhook,
// review_through_api.cpp the API server; probe/ does the asking): the pods to send, the error exit.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "cli/review_command.h"

namespace shmguard::cli {

// One pod to send: the pod a controller would create from a template (or the built-in test pod).
struct PodToReview {
  std::string file, kind, name, path;  // where the template is: path is its place in the object
  int line = 0;
  std::string namespace_name;  // the manifest's, or empty
  nlohmann::json pod;
  std::string where() const;   // "file:line Kind/name template", as `check` prints it
  nlohmann::json where_json() const;  // {file, line, kind, name, template}
};
Result<std::vector<PodToReview>> pods_to_review(const ReviewArgs& a);

// Prints "shmguard review: <msg>" and returns the bad-input exit code.
int review_fail(const std::string& msg);

}  // namespace shmguard::cli
