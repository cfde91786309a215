// A list read from the API server as kubectl reads one: in pages (limit=500 and the continue
// token), each page parsed on its own, so a cluster's 10,000 pods are never one body in memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/result.h"
#include "kube/access.h"

namespace shmguard::kube {

std::string url_encode(const std::string& s);

// One GET of a path (with its query): kube::get in the program, canned pages in the tests.
using Getter = std::function<Result<Response>(const std::string& path)>;
Getter getter(const Access& api, int timeout_s);  // raw: the caller parses the text

inline constexpr int kListPage = 500;

// GETs the list at `path` (with or without a query) page by page, each parsed by `parse` and given
// to `take`. A transport failure or a page that is not JSON is a Failure naming `what`; an HTTP
// error comes back as the Response, for the caller to say which permission it wants; a list read
// whole is an empty optional. `bytes`, when given, adds up the bodies read.
Result<std::optional<Response>> list_pages(const Getter& get, const std::string& path, const char* what,
                                           nlohmann::json (*parse)(const std::string&),
                                           const std::function<void(const nlohmann::json&)>& take,
                                           std::atomic<std::uint64_t>* bytes = nullptr);

}  // namespace shmguard::kube
