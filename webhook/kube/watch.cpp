// The streaming GET under a watch (see watch.h).
#include "kube/watch.h"

#include "kube/client_internal.h"

namespace shmguard::kube {

bool LineSplitter::feed(std::string_view chunk, const std::function<bool(std::string_view)>& on_line) {
  while (!chunk.empty()) {
    const auto nl = chunk.find('\n');
    if (nl == std::string_view::npos) {
      if (partial_.size() + chunk.size() > max_line_) return false;
      partial_.append(chunk);
      return true;
    }
    std::string_view line = chunk.substr(0, nl);
    chunk.remove_prefix(nl + 1);
    if (!partial_.empty()) {
      if (partial_.size() + line.size() > max_line_) return false;
      partial_.append(line);
      line = partial_;
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const bool go_on = line.empty() || on_line(line);
    partial_.clear();
    if (!go_on) return false;
  }
  return true;
}

void StreamCancel::cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  if (stop_) stop_();
}

bool StreamCancel::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

// Registers a running client with a StreamCancel for as long as it lives.
class StreamSession {
 public:
  StreamSession(StreamCancel* c, httplib::SSLClient& cli) : c_(c) {
    if (!c_) return;
    std::lock_guard<std::mutex> lock(c_->mu_);
    c_->stop_ = [&cli] { cli.stop(); };
  }
  ~StreamSession() {
    if (!c_) return;
    std::lock_guard<std::mutex> lock(c_->mu_);
    c_->stop_ = nullptr;
  }
  StreamSession(const StreamSession&) = delete;
  StreamSession& operator=(const StreamSession&) = delete;

 private:
  StreamCancel* c_;
};

Result<StreamEnd> stream(const Access& a, const std::string& path, int idle_timeout_s,
                         const std::function<bool(std::string_view)>& on_line, StreamCancel* cancel,
                         std::size_t max_line) {
  auto made = new_client(a, idle_timeout_s * 1000L);
  if (!made) return made.failure_part();
  httplib::SSLClient& cli = **made;
  if (cancel && cancel->cancelled()) return Failure{"cancelled"};
  StreamSession session(cancel, cli);
  StreamEnd end;
  LineSplitter lines(max_line);
  bool got_headers = false;
  auto res = cli.Get(
      (a.base_path + path).c_str(), request_headers(a),
      [&](const httplib::Response& r) {
        got_headers = true;
        end.status = r.status;
        return true;
      },
      [&](const char* data, std::size_t n) {
        end.bytes += n;
        if (end.status != 200) {
          if (end.text.size() < (64u << 10)) end.text.append(data, std::min<std::size_t>(n, (64u << 10) - end.text.size()));
          return true;
        }
        if (!lines.feed(std::string_view(data, n), on_line)) return end.stopped_by_reader = true, false;
        return !(cancel && cancel->cancelled());
      });
  if (!res && !got_headers) return Failure{transport_failure(a, cli, res.error())};
  return end;  // a cut stream, a read timeout or the reader's stop: the caller watches again
}

}  // namespace shmguard::kube
