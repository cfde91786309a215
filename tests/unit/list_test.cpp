// Paged lists from the API server (kube/list.h): the limit and continue tokens, an HTTP error
// handed back, a page that is not JSON, the bytes read; and url_encode.
#include "kube/list.h"

#include <gtest/gtest.h>

#include <map>

using namespace shmguard;
using nlohmann::json;

namespace {

json parse(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json() : j;
}

// Canned answers by path; a path not there is a transport failure.
struct Canned {
  std::map<std::string, kube::Response> by_path;
  std::vector<std::string> asked;
  kube::Getter getter() {
    return [this](const std::string& path) -> Result<kube::Response> {
      asked.push_back(path);
      auto it = by_path.find(path);
      if (it == by_path.end()) return Failure{"cannot reach the API server"};
      return it->second;
    };
  }
};

kube::Response ok(const std::string& text) { return {.status = 200, .body = nullptr, .text = text}; }

}  // namespace

TEST(ListPages, EveryPageByItsContinueToken) {
  Canned api;
  api.by_path["/api/v1/pods?fieldSelector=x&limit=500"] = ok(R"({"metadata":{"continue":"a b/c"},"items":[1,2]})");
  api.by_path["/api/v1/pods?fieldSelector=x&limit=500&continue=a%20b%2Fc"] = ok(R"({"metadata":{},"items":[3]})");
  std::vector<int> items;
  std::atomic<std::uint64_t> bytes{0};
  auto r = kube::list_pages(api.getter(), "/api/v1/pods?fieldSelector=x", "pods", parse, [&](const json& page) {
    for (const auto& i : page["items"]) items.push_back(i.get<int>());
  }, &bytes);
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(*r) << "read whole: no HTTP error";
  EXPECT_EQ(items, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(api.asked.size(), 2u);
  EXPECT_EQ(bytes, api.by_path.begin()->second.text.size() + std::next(api.by_path.begin())->second.text.size());
}

TEST(ListPages, APathWithoutAQueryGetsOne) {
  Canned api;
  api.by_path["/api/v1/nodes?limit=500"] = ok(R"({"items":[]})");
  EXPECT_TRUE(kube::list_pages(api.getter(), "/api/v1/nodes", "nodes", parse, [](const json&) {}));
}

TEST(ListPages, AnHttpErrorIsHandedBackForTheCallerToName) {
  Canned api;
  api.by_path["/api/v1/nodes?limit=500"] = {.status = 403, .body = nullptr, .text = R"({"message":"forbidden"})"};
  auto r = kube::list_pages(api.getter(), "/api/v1/nodes", "nodes", parse, [](const json&) { FAIL(); });
  ASSERT_TRUE(r);
  ASSERT_TRUE(*r);
  EXPECT_EQ((*r)->status, 403);
}

TEST(ListPages, APageThatIsNotJsonAndATransportFailureAreFailures) {
  Canned api;
  api.by_path["/api/v1/nodes?limit=500"] = ok("<html>proxy error</html>");
  EXPECT_EQ(kube::list_pages(api.getter(), "/api/v1/nodes", "nodes", parse, [](const json&) {}).error(),
            "listing nodes: the API server's answer is not JSON");
  EXPECT_EQ(kube::list_pages(api.getter(), "/api/v1/pods", "pods", parse, [](const json&) {}).error(),
            "cannot reach the API server");
}

TEST(UrlEncode, UnreservedCharactersStayTheRestArePercentEncoded) {
  EXPECT_EQ(kube::url_encode("status.phase=Running,spec.nodeName=n-1_a~"), "status.phase%3DRunning%2Cspec.nodeName%3Dn-1_a~");
  EXPECT_EQ(kube::url_encode("app.kubernetes.io/name=shmguard"), "app.kubernetes.io%2Fname%3Dshmguard");
  EXPECT_EQ(kube::url_encode("\xff "), "%FF%20");
}
