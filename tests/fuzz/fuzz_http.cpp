// Fuzz target: the HTTP/1.1 request parser.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/http.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view buf(reinterpret_cast<const char*>(data), size);
  shmguard::server::HttpRequest req;
  auto r = shmguard::server::parse_request(buf, 1 << 20, req);
  if (r.status == shmguard::server::ParseStatus::kComplete && (r.consumed > size || req.path.empty())) std::abort();
  if (r.status == shmguard::server::ParseStatus::kError && (r.error_status < 400 || r.message.empty())) std::abort();
  return 0;
}
