// The https:// URLs `shmguard review` is given: the webhook's, or the API server's.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace shmguard::probe {

struct Url {
  std::string host;
  int port = 443;
  std::string path;
};

// https://host[:port][/path]; the path defaults to `default_path`. `flag` names the option in errors.
Result<Url> parse_url(const std::string& s, std::string_view default_path, std::string_view flag = "--server");

}  // namespace shmguard::probe
