// A watch's HTTP side: a GET whose body is read as it arrives (chunked, as the API server streams
// a watch), cut into lines (one JSON event per line), each handed on at once, so nothing but the
// line being read is held; bounded by an idle timeout, and cancellable from another thread.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "kube/access.h"

namespace shmguard::kube {

// Cuts a byte stream, in whatever pieces it comes, into '\n'-terminated lines (a '\r' before the
// '\n' is dropped; empty lines are skipped). More than `max_line` bytes of a line waiting for its
// end is an error: the stream is not what it should be (a line whole in one chunk is never copied).
class LineSplitter {
 public:
  explicit LineSplitter(std::size_t max_line) : max_line_(max_line) {}
  // Calls `on_line` for each line `chunk` completes; false when a line outgrew max_line or
  // `on_line` returned false.
  bool feed(std::string_view chunk, const std::function<bool(std::string_view)>& on_line);
  std::size_t pending() const { return partial_.size(); }

 private:
  std::size_t max_line_;
  std::string partial_;
};

// Ends a stream from another thread (SIGTERM while a quiet watch waits): the one running now, and
// any started after.
class StreamCancel {
 public:
  void cancel();
  bool cancelled() const;

 private:
  friend class StreamSession;
  mutable std::mutex mu_;
  std::function<void()> stop_;
  bool cancelled_ = false;
};

struct StreamEnd {
  int status = 0;              // the HTTP status
  std::string text;            // a non-200 body (its first 64 KiB), for the message
  bool stopped_by_reader = false;  // on_line returned false
  std::uint64_t bytes = 0;     // of body read
};

// GET `path` from `a` and give each line of a 200 body to `on_line` (false stops the stream).
// The connection fails after `idle_timeout_s` without a byte (a watch's timeoutSeconds should end
// it before: the API server closes a quiet watch then). A transport failure before the headers is
// a Failure; one after (the stream cut) ends the stream as if it ended there.
Result<StreamEnd> stream(const Access& a, const std::string& path, int idle_timeout_s,
                         const std::function<bool(std::string_view)>& on_line, StreamCancel* cancel = nullptr,
                         std::size_t max_line = 64u << 20);

}  // namespace shmguard::kube
