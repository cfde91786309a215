// https:// URL parsing for the probes (see url.h).
#include "probe/url.h"

namespace shmguard::probe {

Result<Url> parse_url(const std::string& s, std::string_view default_path, std::string_view flag) {
  Url u;
  u.path = std::string(default_path);
  const std::string scheme = "https://";
  if (s.compare(0, scheme.size(), scheme) != 0) {
    return Failure{std::string(flag) + " must be an https:// URL, got \"" + s + "\""};
  }
  std::string rest = s.substr(scheme.size());
  if (auto slash = rest.find('/'); slash != std::string::npos) {
    if (slash + 1 < rest.size()) u.path = rest.substr(slash);
    rest = rest.substr(0, slash);
  }
  std::string port;
  if (!rest.empty() && rest.front() == '[') {  // [::1]:8443
    auto close = rest.find(']');
    if (close == std::string::npos) {
      return Failure{std::string(flag) + ": unterminated IPv6 address"};
    }
    u.host = rest.substr(1, close - 1);
    if (close + 1 < rest.size() && rest[close + 1] == ':') port = rest.substr(close + 2);
  } else if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    u.host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  } else {
    u.host = rest;
  }
  if (!port.empty()) {
    if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 || std::stoi(port) > 65535) {
      return Failure{std::string(flag) + ": bad port \"" + port + "\""};
    }
    u.port = std::stoi(port);
  }
  if (u.host.empty()) {
    return Failure{std::string(flag) + ": no host in \"" + s + "\""};
  }
  return u;
}

}  // namespace shmguard::probe
