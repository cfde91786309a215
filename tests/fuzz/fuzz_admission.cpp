// Fuzz target: the whole AdmissionReview handler, bytes in, response out. Every answer must be a
// refusal with a message (the server's 400) or an AdmissionReview that allows the pod; a returned patch must apply to
// the object that was sent.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "admission/json_reader.h"
#include "admission/review.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const shmguard::config::Config cfg;
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto out = shmguard::admission::handle_review(body, cfg);
  if (out.decision == shmguard::admission::Decision::kRejected) {
    if (out.error.empty() || !out.body.empty()) std::abort();
    return 0;
  }
  auto res = nlohmann::json::parse(out.body);
  if (res["response"]["allowed"] != true) std::abort();
  if (res["response"].contains("patch")) {
    // Decode the patch and apply it to the request's object as the apiserver would.
    static const std::string kChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string b64 = res["response"]["patch"], raw;
    int val = 0, bits = -8;
    for (char c : b64) {
      if (c == '=') break;
      val = ((val << 6) + static_cast<int>(kChars.find(c))) & 0xFFFFFF;
      bits += 6;
      if (bits >= 0) {
        raw.push_back(static_cast<char>((val >> bits) & 0xFF));
        bits -= 8;
      }
    }
    nlohmann::json review;
    if (!shmguard::admission::read_json(body, review, 128).ok()) std::abort();
    auto patched = review["request"]["object"].patch(nlohmann::json::parse(raw));  // throws if it does not apply
    (void)patched;
  }
  return 0;
}
