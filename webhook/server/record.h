// One admission told: counted in the metrics and written to the log, side by side. The text of its
// decision and reason is written here, at the edge (base/reason.h). The server's POST /mutate calls
// these; so do the tests of what an engine's failure leaves behind.
#pragma once

#include "admission/review.h"
#include "base/reason.h"
#include "server/metrics.h"

namespace shmguard::server {

// An admission review answered (or refused as no review): its count, latency and injected size,
// and its log line at its reason's level.
void record_admission(Metrics& metrics, const admission::AdmissionOutcome& out, double seconds);

// A request refused before it reached the admission layer (the HTTP parser's, a wrong content
// type): counted as rejected, no latency, no log line (a broken client can send a flood).
void count_refusal(Metrics& metrics, Reason why);

}  // namespace shmguard::server
