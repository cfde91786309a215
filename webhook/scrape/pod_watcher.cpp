// The monitor's pods from a list and a watch (see pod_watcher.h).
#include "scrape/pod_watcher.h"

#include <algorithm>
#include <chrono>
#include <iostream>

#include "base/json_fields.h"
#include "kube/list.h"
#include "monitor/allocator.h"

namespace shmguard::scrape {

using nlohmann::json;

PodWatcher::PodWatcher(const kube::Access& api, PodWatchOptions o, const config::Config* cfg)
    : api_(api), o_(std::move(o)), cfg_(cfg), store_(cfg) {}

PodWatcher::~PodWatcher() { stop(); }

void PodWatcher::start() { thread_ = std::thread([this] { run(); }); }

void PodWatcher::stop() {
  stop_ = true;
  cancel_.cancel();
  synced_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status PodWatcher::wait_synced(int timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  synced_cv_.wait_for(lock, std::chrono::seconds(timeout_s), [&] { return synced_ || stop_; });
  if (synced_) return Ok{};
  return Failure{last_error_.empty() ? "the first list of pods is not in yet" : last_error_};
}

bool PodWatcher::any_missing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return store_.any_assessed_missing();
}

PodWatcher::Snapshot PodWatcher::snapshot(const monitor::Judge& judge) const {
  Snapshot s;
  std::lock_guard<std::mutex> lock(mu_);
  s.pods = store_.pods(&judge);
  s.kept = store_.size();
  s.any_missing = store_.any_assessed_missing();
  s.counts = store_.counts();
  s.resource_version = store_.resource_version();
  s.last_error = last_error_;
  s.api_bytes = bytes_;
  return s;
}

namespace {

std::string pods_path(const PodWatchOptions& o) {
  return "/api/v1/pods" + (o.field_selector.empty() ? std::string() : "?fieldSelector=" + kube::url_encode(o.field_selector));
}

}  // namespace

bool PodWatcher::relist() {
  const auto t0 = std::chrono::steady_clock::now();
  auto listing = store_.start_listing();
  std::string rv;
  auto r = kube::list_pages(kube::getter(api_, o_.request_timeout_s), pods_path(o_), "pods", monitor::parse_pod_list, [&](const json& page) {
    listing.add_page(page, cfg_);
    const json* md = object_at(page, "metadata");
    if (md && rv.empty()) rv = str_field(*md, "resourceVersion");  // the first page's: the list's snapshot
  }, &bytes_);
  std::string error;
  if (!r) error = r.error();
  else if (*r && ((*r)->status == 403 || (*r)->status == 401))
    error = "cannot list pods: " + kube::error_message(**r) + " (needs `list pods` in every namespace)";
  else if (*r) error = "listing pods: HTTP " + std::to_string((*r)->status) + ": " + kube::error_message(**r);
  std::lock_guard<std::mutex> lock(mu_);
  if (!error.empty()) return last_error_ = error, false;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << (std::string("shmguard monitor: ") + (synced_ ? "relist" : "first list") + " of " + std::to_string(listing.seen) +
                " pods in " + std::to_string(ms) + " ms, resourceVersion " + rv + "\n");
  store_.finish_listing(std::move(listing), rv);
  monitor::release_free_memory();  // the pages' text and trees
  need_list_ = false;
  synced_ = true;
  last_error_.clear();
  synced_cv_.notify_all();
  return true;
}

void PodWatcher::watch_once() {
  std::string rv;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rv = store_.resource_version();
  }
  const std::string path = pods_path(o_) + (o_.field_selector.empty() ? "?" : "&") +
                           "watch=1&allowWatchBookmarks=true&timeoutSeconds=" + std::to_string(o_.watch_timeout_s) +
                           "&resourceVersion=" + kube::url_encode(rv);
  bool relist = false, rewatch = false;
  auto end = kube::stream(api_, path, o_.watch_timeout_s + 30, [&](std::string_view line) {
    bytes_ += line.size() + 1;
    const json event = monitor::parse_pod_list(std::string(line));
    std::lock_guard<std::mutex> lock(mu_);
    const monitor::WatchStep step = event.is_object() ? store_.apply(event) : monitor::WatchStep::kRewatch;
    if (step == monitor::WatchStep::kRelist) relist = true;
    if (step == monitor::WatchStep::kRewatch) rewatch = true;
    return step == monitor::WatchStep::kContinue;
  }, &cancel_);
  if (end && end->status != 200) bytes_ += end->bytes;
  std::lock_guard<std::mutex> lock(mu_);
  if (!end) {
    last_error_ = "watching pods: " + end.error();
  } else if (end->status == 410) {
    relist = true;  // the resourceVersion is too old for the API server's watch cache
  } else if (end->status != 200) {
    last_error_ = "watching pods: HTTP " + std::to_string(end->status) + ": " + end->text.substr(0, 300) +
                  (end->status == 403 ? " (needs `watch pods`)" : "");
  } else if (rewatch) {
    last_error_ = "watching pods: the API server sent an ERROR event or a line that is not one";
  }
  if (relist) need_list_ = true;
}

void PodWatcher::run() {
  int backoff_ms = 500;
  while (!stop_) {
    bool list;
    {
      std::lock_guard<std::mutex> lock(mu_);
      list = need_list_;
    }
    bool ok = true;
    if (list) ok = relist();
    if (ok && !stop_) {
      const auto t0 = std::chrono::steady_clock::now();
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_error_.clear();
      }
      watch_once();
      std::lock_guard<std::mutex> lock(mu_);
      // A watch that ended at once (an error, a cut) waits before the next; one that ran a while did not fail.
      ok = last_error_.empty() || std::chrono::steady_clock::now() - t0 > std::chrono::seconds(30);
      if (!last_error_.empty()) std::cerr << "shmguard monitor: " + last_error_ + "\n";
    } else if (!ok) {
      std::lock_guard<std::mutex> lock(mu_);
      std::cerr << "shmguard monitor: " + last_error_ + "\n";
    }
    if (ok) {
      backoff_ms = 500;
      continue;
    }
    for (int waited = 0; waited < backoff_ms && !stop_; waited += 50) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    backoff_ms = std::min(backoff_ms * 2, 30000);
  }
}

}  // namespace shmguard::scrape
