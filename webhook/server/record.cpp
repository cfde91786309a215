// Admissions counted and logged (see record.h).
#include "server/record.h"

#include "server/log.h"

namespace shmguard::server {

void record_admission(Metrics& metrics, const admission::AdmissionOutcome& out, double secs) {
  using admission::Decision;
  const char* decision = admission::decision_name(out.decision);
  metrics.admission(decision, name(out.reason), secs,
                    out.decision == Decision::kInjected || out.decision == Decision::kUpdated ? out.size_bytes : 0);
  if (!out.owner_lookup.empty()) metrics.owner_lookup(out.owner_lookup, out.owner_cached);
  const Level lvl = log_level(out.reason);
  if (!log_enabled(lvl)) return;
  LogLine line(lvl, "admission");
  line.str("uid", out.uid).str("namespace", out.namespace_name).str("pod", out.pod);
  line.str("decision", decision).str("reason", name(out.reason)).num("latency_ms", secs * 1000.0);
  if (!out.size.empty()) line.str("size", out.size);
  if (!out.procs.empty()) line.str("procs", out.procs);
  if (!out.owner_lookup.empty()) line.str("owner_lookup", out.owner_lookup + (out.owner_cached ? " (cached)" : ""));
  if (!out.warnings.empty()) line.list("warnings", out.warnings);
  if (!out.error.empty()) line.str("error", out.error.substr(0, 200));
  line.emit();
}

void count_refusal(Metrics& metrics, Reason why) {
  metrics.admission(admission::decision_name(admission::Decision::kRejected), name(why), 0, 0);
}

}  // namespace shmguard::server
