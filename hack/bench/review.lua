-- wrk script: POSTs one realistic AdmissionReview (hack/bench/review.json) on every request.
local f = assert(io.open(os.getenv("SHMGUARD_REVIEW") or "hack/bench/review.json", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
wrk.path = "/mutate?timeout=5s"

local non200 = 0
response = function(status, headers, body)
  if status ~= 200 then non200 = non200 + 1 end
end
done = function(summary, latency, requests)
  io.write(string.format("BENCH requests=%d errors=%d non200=%d rps=%.0f p50_us=%d p90_us=%d p99_us=%d max_us=%d\n",
    summary.requests, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
