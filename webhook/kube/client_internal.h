// Inside the kube module only: the TLS client access.cpp builds for an Access (its client
// certificate, the CA it trusts alone, its timeouts), shared by the one-shot requests and the
// watch stream (watch.cpp).
#pragma once

#include <httplib.h>

#include <memory>
#include <string>

#include "kube/access.h"

namespace shmguard::kube {

Result<std::unique_ptr<httplib::SSLClient>> new_client(const Access& a, long timeout_ms);
httplib::Headers request_headers(const Access& a);
// "cannot reach HOST:PORT (where): why", with the certificate check's error when there was one.
std::string transport_failure(const Access& a, httplib::SSLClient& cli, httplib::Error e);

}  // namespace shmguard::kube
