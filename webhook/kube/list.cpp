// Paged lists from the API server (see list.h).
#include "kube/list.h"

#include <cctype>
#include <iomanip>
#include <sstream>

#include "base/json_fields.h"

namespace shmguard::kube {

using nlohmann::json;

std::string url_encode(const std::string& s) {
  std::ostringstream o;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') o << c;
    else o << '%' << std::uppercase << std::hex << std::setw(2) << std::setfill('0') << static_cast<int>(c) << std::dec;
  }
  return o.str();
}

Getter getter(const Access& api, int timeout_s) {
  return [&api, timeout_s](const std::string& path) { return get(api, path, timeout_s, true); };
}

namespace {

// One page of the list at `path`: from the start, or from `next`, the previous page's continue token.
std::string page_path(const std::string& path, const std::string& next) {
  std::string p = path + (path.find('?') == std::string::npos ? "?" : "&") + "limit=" + std::to_string(kListPage);
  return next.empty() ? p : p + "&continue=" + url_encode(next);
}

}  // namespace

Result<std::optional<Response>> list_pages(const Getter& get, const std::string& path, const char* what,
                                           json (*parse)(const std::string&), const std::function<void(const json&)>& take,
                                           std::atomic<std::uint64_t>* bytes) {
  std::string next;
  do {
    auto r = get(page_path(path, next));
    if (!r) return r.failure_part();
    if (bytes) *bytes += r->text.size();
    if (r->status != 200) return std::optional<Response>(std::move(*r));
    const json page = parse(r->text);
    if (page.is_null()) return Failure{std::string("listing ") + what + ": the API server's answer is not JSON"};
    take(page);
    const json* md = object_at(page, "metadata");
    next = md ? str_field(*md, "continue") : "";
  } while (!next.empty());
  return std::optional<Response>();
}

}  // namespace shmguard::kube
