// Minimal HTTP/1.1 message handling for the webhook listeners: request parsing with hard limits,
// response formatting. Pure functions, so the parser can be fuzzed on its own.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shmguard::server {

inline constexpr std::size_t kMaxHeaderBytes = 16 * 1024;

struct HttpRequest {
  std::string method;
  std::string target;  // as sent, query included
  std::string path;    // target without the query
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  bool keep_alive = true;
  const std::string* header(std::string_view lower_name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
  bool close = false;  // send "Connection: close" and close after writing
};

enum class ParseStatus { kIncomplete, kComplete, kError };

struct ParseResult {
  ParseStatus status = ParseStatus::kIncomplete;
  std::size_t consumed = 0;  // bytes of the buffer that made up the request
  int error_status = 400;    // when kError: 400, 413, 431, 505, 411
  std::string message;
};

// Parses one request from the front of `buf`. Bodies need Content-Length (411 otherwise) and
// may not exceed `max_body` (413, detected from the header before the body arrives).
ParseResult parse_request(std::string_view buf, std::size_t max_body, HttpRequest& out);

std::string format_response(const HttpResponse& res);

const char* status_text(int status);

}  // namespace shmguard::server
