// Why a request was answered as it was: a closed set, with one row per reason. The engine, the
// admission layer and the server pass the enum; its text is written only at the edges (the
// metrics' `reason` label, the admission log line, `check`'s JSON).
#pragma once

#include <cstddef>
#include <cstdint>
#include "base/enum_table.h"
#include "base/log_level.h"

namespace shmguard {

enum class Reason : std::uint8_t {
  // The engine's (inject_pod): what it did with a pod.
  kInjected,         // a new /dev/shm volume
  kStale,            // shmguard's own volume with another size, or a container that does not mount it
  kRefreshed,        // shmguard's own volume, the right size: its annotations brought up to date
  kAlreadyInjected,  // shmguard's own volume, nothing to change
  kUserManaged,      // a container already mounts something at /dev/shm
  kOptedOut,         // shmguard.io/inject: "false"
  kHostIpc,          // hostIPC: true
  kNotTraining,      // no rule recognised a training pod
  kInvalidPod,       // a pod that cannot be patched safely
  kNoneNeeded,       // 0 DataLoader workers and one process: nothing goes through /dev/shm
  // The admission layer's: a review the engine was not asked about, or could not answer.
  kNotAPod,
  kNotCreate,
  kSubresource,
  kNoObject,
  kInternalError,  // the engine (or an owner lookup) threw: the pod admitted unchanged
  kBadRequest,     // the body is no AdmissionReview
  // The server's: a request refused before it reached the admission layer.
  kContentType,
  kHttp400,  // the HTTP parser's refusals, by status
  kHttp411,
  kHttp413,
  kHttp431,
  kHttp505,
  kCount,
};

struct ReasonRow {
  Reason reason;
  const char* name;     // the metric label and the log's "reason"
  LogLevel log;         // the admission log line's level
  int http_status = 0;  // the kHttp rows: the status the HTTP parser refused the request with
};

// In Reason's order. Injections are the audit trail (info); the many pods that are not training
// pods are debug; our own failure is an error, a client's malformed request a warning.
inline constexpr ReasonRow kReasonTable[] = {
    {.reason = Reason::kInjected, .name = "injected", .log = LogLevel::kInfo},
    {.reason = Reason::kStale, .name = "stale", .log = LogLevel::kInfo},
    {.reason = Reason::kRefreshed, .name = "refreshed", .log = LogLevel::kInfo},
    {.reason = Reason::kAlreadyInjected, .name = "already-injected", .log = LogLevel::kDebug},
    {.reason = Reason::kUserManaged, .name = "user-managed", .log = LogLevel::kDebug},
    {.reason = Reason::kOptedOut, .name = "opted-out", .log = LogLevel::kDebug},
    {.reason = Reason::kHostIpc, .name = "host-ipc", .log = LogLevel::kDebug},
    {.reason = Reason::kNotTraining, .name = "not-training", .log = LogLevel::kDebug},
    {.reason = Reason::kInvalidPod, .name = "invalid-pod", .log = LogLevel::kDebug},
    {.reason = Reason::kNoneNeeded, .name = "none-needed", .log = LogLevel::kDebug},
    {.reason = Reason::kNotAPod, .name = "not-a-pod", .log = LogLevel::kDebug},
    {.reason = Reason::kNotCreate, .name = "not-create", .log = LogLevel::kDebug},
    {.reason = Reason::kSubresource, .name = "subresource", .log = LogLevel::kDebug},
    {.reason = Reason::kNoObject, .name = "no-object", .log = LogLevel::kDebug},
    {.reason = Reason::kInternalError, .name = "internal-error", .log = LogLevel::kError},
    {.reason = Reason::kBadRequest, .name = "bad-request", .log = LogLevel::kWarn},
    {.reason = Reason::kContentType, .name = "content-type", .log = LogLevel::kWarn},
    {.reason = Reason::kHttp400, .name = "http-400", .log = LogLevel::kWarn, .http_status = 400},
    {.reason = Reason::kHttp411, .name = "http-411", .log = LogLevel::kWarn, .http_status = 411},
    {.reason = Reason::kHttp413, .name = "http-413", .log = LogLevel::kWarn, .http_status = 413},
    {.reason = Reason::kHttp431, .name = "http-431", .log = LogLevel::kWarn, .http_status = 431},
    {.reason = Reason::kHttp505, .name = "http-505", .log = LogLevel::kWarn, .http_status = 505},
};

static_assert(in_enum_order(kReasonTable, &ReasonRow::reason, static_cast<std::size_t>(Reason::kCount)),
              "kReasonTable: one row for every Reason, in Reason's order");

constexpr const ReasonRow& reason_row(Reason r) { return kReasonTable[static_cast<std::size_t>(r)]; }
constexpr const char* name(Reason r) { return reason_row(r).name; }
constexpr LogLevel log_level(Reason r) { return reason_row(r).log; }

// The reason for a request the HTTP parser refused with `status` (400, 411, 413, 431, 505; any
// other, which the parser never gives, counts as a 400).
constexpr Reason http_reason(int status) {
  for (const auto& row : kReasonTable)
    if (row.http_status == status) return row.reason;
  return Reason::kHttp400;
}

}  // namespace shmguard
