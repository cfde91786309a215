// HTTP/1.1 request parsing limits and response formatting.
#include "server/http.h"

#include <gtest/gtest.h>

using namespace shmguard::server;

TEST(Http, CompleteRequest) {
  std::string raw = "POST /mutate?timeout=10s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}GET";
  HttpRequest req;
  auto r = parse_request(raw, 1024, req);
  ASSERT_EQ(r.status, ParseStatus::kComplete);
  EXPECT_EQ(r.consumed, raw.size() - 3);
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.path, "/mutate");
  EXPECT_EQ(req.target, "/mutate?timeout=10s");
  EXPECT_EQ(req.body, "{}");
  EXPECT_TRUE(req.keep_alive);
  ASSERT_NE(req.header("content-type"), nullptr);
  EXPECT_EQ(*req.header("content-type"), "application/json");
}

TEST(Http, IncompleteUntilBodyArrives) {
  HttpRequest req;
  EXPECT_EQ(parse_request("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab", 100, req).status, ParseStatus::kIncomplete);
  EXPECT_EQ(parse_request("POST / HTTP/1.1\r\nContent-Le", 100, req).status, ParseStatus::kIncomplete);
}

TEST(Http, LimitsAndErrors) {
  HttpRequest req;
  auto big = parse_request("POST / HTTP/1.1\r\nContent-Length: 1000\r\n\r\n", 999, req);
  EXPECT_EQ(big.status, ParseStatus::kError);
  EXPECT_EQ(big.error_status, 413);
  EXPECT_EQ(parse_request(std::string(20000, 'a'), 10, req).error_status, 431);
  EXPECT_EQ(parse_request("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 10, req).error_status, 411);
  EXPECT_EQ(parse_request("POST / HTTP/2.0\r\n\r\n", 10, req).error_status, 505);
  for (const char* bad : {"GARBAGE\r\n\r\n", "POST /\r\n\r\n", "POST x HTTP/1.1\r\n\r\n",
                          "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "POST / HTTP/1.1\r\nNoColon\r\n\r\n",
                          "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                          "\x16\x03\x01\x02\x01\x01\xfc\x03\x03\r\n\r\n"}) {
    auto r = parse_request(bad, 100, req);
    EXPECT_EQ(r.status, ParseStatus::kError) << bad;
    EXPECT_EQ(r.error_status, 400) << bad;
  }
}

TEST(Http, ConnectionHeaders) {
  HttpRequest req;
  parse_request("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", 0, req);
  EXPECT_FALSE(req.keep_alive);
  parse_request("GET / HTTP/1.0\r\n\r\n", 0, req);
  EXPECT_FALSE(req.keep_alive);
  parse_request("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 0, req);
  EXPECT_TRUE(req.keep_alive);
}

TEST(Http, FormatsResponse) {
  HttpResponse res;
  res.status = 415;
  res.body = "no";
  res.close = true;
  EXPECT_EQ(format_response(res),
            "HTTP/1.1 415 Unsupported Media Type\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n"
            "Connection: close\r\n\r\nno");
}
