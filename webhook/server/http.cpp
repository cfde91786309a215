// HTTP/1.1 request parsing and response formatting (see http.h).
#include "server/http.h"

#include <optional>
#include <utility>

#include "base/text.h"

namespace shmguard::server {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

ParseResult error(int status, std::string msg) {
  ParseResult r;
  r.status = ParseStatus::kError;
  r.error_status = status;
  r.message = std::move(msg);
  return r;
}

}  // namespace

const std::string* HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers)
    if (k == lower_name) return &v;
  return nullptr;
}

namespace {

// A request line or header that is refused: the error to answer with; nullopt when the line is fine.
using LineError = std::optional<ParseResult>;

// The request line: method, target, path and the version's default keep-alive.
LineError parse_request_line(std::string_view line, HttpRequest& out) {
  auto sp1 = line.find(' ');
  auto sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1) return error(400, "malformed request line");
  out.method = std::string(line.substr(0, sp1));
  out.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  std::string_view version = line.substr(sp2 + 1);
  if (out.method.empty() || out.target.empty() || out.target[0] != '/') return error(400, "malformed request line");
  for (char c : out.method)
    if (!is_token_char(c)) return error(400, "malformed method");
  if (version == "HTTP/1.1") out.keep_alive = true;
  else if (version == "HTTP/1.0") out.keep_alive = false;
  else if (version.rfind("HTTP/", 0) == 0) return error(505, "only HTTP/1.0 and HTTP/1.1 are supported");
  else return error(400, "malformed request line");
  out.path = out.target.substr(0, out.target.find('?'));
  return std::nullopt;
}

// One header line; Content-Length, Transfer-Encoding and Connection are acted on.
LineError parse_header(std::string_view line, HttpRequest& out, std::size_t& content_length, bool& has_length) {
  auto colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return error(400, "malformed header line");
  for (char c : line.substr(0, colon))
    if (!is_token_char(c)) return error(400, "malformed header name");
  std::string name = lowercase(line.substr(0, colon));
  std::string_view value = trim(line.substr(colon + 1));
  for (char c : value)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) return error(400, "control character in header value");
  if (name == "content-length") {
    if (value.empty() || value.size() > 18 || value.find_first_not_of("0123456789") != std::string_view::npos)
      return error(400, "invalid Content-Length");
    std::size_t v = std::stoull(std::string(value));
    if (has_length && v != content_length) return error(400, "conflicting Content-Length headers");
    content_length = v;
    has_length = true;
  } else if (name == "transfer-encoding") {
    return error(411, "chunked request bodies are not supported; send Content-Length");
  } else if (name == "connection") {
    auto v = lowercase(value);
    if (v.find("close") != std::string::npos) out.keep_alive = false;
    else if (v.find("keep-alive") != std::string::npos) out.keep_alive = true;
  }
  if (out.headers.size() >= 100) return error(431, "too many headers");
  out.headers.emplace_back(std::move(name), std::string(value));
  return std::nullopt;
}

}  // namespace

ParseResult parse_request(std::string_view buf, std::size_t max_body, HttpRequest& out) {
  auto end = buf.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (buf.size() > kMaxHeaderBytes) return error(431, "request headers too large");
    return ParseResult{};  // kIncomplete: the head is still coming
  }
  if (end > kMaxHeaderBytes) return error(431, "request headers too large");
  std::string_view head = buf.substr(0, end);
  out = HttpRequest{};
  auto line_end = head.find("\r\n");
  if (auto e = parse_request_line(head.substr(0, line_end), out)) return *e;
  std::size_t content_length = 0;
  bool has_length = false;
  std::size_t pos = line_end == std::string_view::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    auto nl = head.find("\r\n", pos);
    std::string_view line = head.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? head.size() : nl + 2;
    if (auto e = parse_header(line, out, content_length, has_length)) return *e;
  }
  if (content_length > max_body)
    return error(413, "request body of " + std::to_string(content_length) + " bytes exceeds the limit of " +
                          std::to_string(max_body));
  std::size_t total = end + 4 + content_length;
  if (buf.size() < total) return ParseResult{};  // kIncomplete: the body is still coming
  out.body = std::string(buf.substr(end + 4, content_length));
  ParseResult r;
  r.status = ParseStatus::kComplete;
  r.consumed = total;
  return r;
}

namespace {
// Every status this server sends, with its reason phrase (RFC 9110).
constexpr std::pair<int, const char*> kStatusLines[] = {
    {200, "OK"},
    {400, "Bad Request"},
    {404, "Not Found"},
    {405, "Method Not Allowed"},
    {408, "Request Timeout"},
    {411, "Length Required"},
    {413, "Payload Too Large"},
    {415, "Unsupported Media Type"},
    {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"},
    {503, "Service Unavailable"},
    {505, "HTTP Version Not Supported"},
};
}  // namespace

const char* status_text(int status) {
  for (const auto& [code, text] : kStatusLines)
    if (code == status) return text;
  return "Unknown";
}

std::string format_response(const HttpResponse& res) {
  std::string out;
  out.reserve(res.body.size() + 160);
  out += "HTTP/1.1 ";
  out += std::to_string(res.status);
  out += ' ';
  out += status_text(res.status);
  out += "\r\nContent-Type: ";
  out += res.content_type;
  out += "\r\nContent-Length: ";
  out += std::to_string(res.body.size());
  out += res.close ? "\r\nConnection: close\r\n\r\n" : "\r\n\r\n";
  out += res.body;
  return out;
}

}  // namespace shmguard::server
