#include "metrics/trace.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "base/files.h"

namespace ringpilot::metrics {
namespace {

// The signal handler may only touch async-signal-safe state: a semaphore.
sem_t g_flush_sem;
std::atomic<bool> g_flush_in_use{false};
struct sigaction g_old_action;

void OnSigusr2(int) { sem_post(&g_flush_sem); }

using Json = nlohmann::ordered_json;  // keys in the order written here

// Built by emplace: an initializer list copies every value through a temporary (twice as
// slow for a full ring of 100000 events).
Json EventJson(const TraceEvent& e, int pid) {
  Json event(Json::value_t::object);
  auto& fields = event.get_ref<Json::object_t&>();
  fields.reserve(8);
  fields.emplace("name", e.name);
  fields.emplace("cat", e.cat);
  fields.emplace("ph", "X");
  fields.emplace("ts", e.ts_us);
  fields.emplace("dur", e.dur_us);
  fields.emplace("pid", pid);
  fields.emplace("tid", e.tid);
  if (e.arg_name) {
    Json args(Json::value_t::object);
    args.get_ref<Json::object_t&>().emplace(e.arg_name, e.arg);
    fields.emplace("args", std::move(args));
  }
  return event;
}

Json Metadata(const char* what, int pid, int tid, const char* arg, Json value) {
  return {{"name", what},
          {"ph", "M"},
          {"pid", pid},
          {"tid", tid},
          {"args", Json::object({{arg, std::move(value)}})}};
}

}  // namespace

Trace::Trace(int pid, std::string process_name, std::size_t capacity, double clock_offset_seconds)
    : pid_(pid),
      process_name_(std::move(process_name)),
      offset_us_(std::llround(clock_offset_seconds * 1e6)) {
  if (capacity == 0) throw std::invalid_argument("trace: capacity must be at least 1");
  ring_.resize(capacity);
}

Trace::~Trace() {
  if (flusher_.joinable()) {
    stop_.store(true);
    sem_post(&g_flush_sem);
    flusher_.join();
  }
  if (handler_installed_) {
    sigaction(SIGUSR2, &g_old_action, nullptr);
    sem_destroy(&g_flush_sem);
    g_flush_in_use.store(false);
  }
}

std::int64_t Trace::NowMicros() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() +
         offset_us_;
}

void Trace::Record(const TraceEvent& event) {
  std::lock_guard<std::mutex> lock(mu_);
  ring_[next_ % ring_.size()] = event;
  ++next_;
}

void Trace::Complete(const char* name, const char* cat, int tid, double seconds,
                     const char* arg_name, std::int64_t arg) {
  TraceEvent e;
  e.name = name;
  e.cat = cat;
  e.tid = tid;
  e.dur_us = std::llround(std::max(0.0, seconds) * 1e6);
  e.ts_us = NowMicros() - e.dur_us;
  e.arg_name = arg_name;
  e.arg = arg;
  Record(e);
}

void Trace::CompleteAt(const char* name, const char* cat, int tid, double start_unix,
                       double seconds, const char* arg_name, std::int64_t arg) {
  TraceEvent e;
  e.name = name;
  e.cat = cat;
  e.tid = tid;
  e.dur_us = std::llround(std::max(0.0, seconds) * 1e6);
  e.ts_us = std::llround(start_unix * 1e6) + offset_us_;
  e.arg_name = arg_name;
  e.arg = arg;
  Record(e);
}

std::vector<TraceEvent> Trace::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::size_t cap = ring_.size();
  const std::size_t n = next_ < cap ? static_cast<std::size_t>(next_) : cap;
  std::vector<TraceEvent> out;
  out.reserve(n);
  const std::uint64_t first = next_ - n;
  for (std::uint64_t i = first; i < next_; ++i) out.push_back(ring_[i % cap]);
  return out;
}

std::uint64_t Trace::recorded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_;
}

std::string Trace::ToJson() const {
  const std::vector<TraceEvent> events = Snapshot();
  const std::uint64_t total = recorded();
  Json trace_events = Json::array();
  trace_events.get_ref<Json::array_t&>().reserve(events.size() + 4);
  trace_events.push_back(Metadata("process_name", pid_, 0, "name", process_name_));
  trace_events.push_back(Metadata("process_sort_index", pid_, 0, "sort_index", pid_));
  trace_events.push_back(Metadata("thread_name", pid_, kTrainTid, "name", "train"));
  trace_events.push_back(Metadata("thread_name", pid_, kCommTid, "name", "collectives"));
  for (const TraceEvent& e : events) trace_events.push_back(EventJson(e, pid_));
  Json doc = Json::object();
  doc["traceEvents"] = std::move(trace_events);  // moved: an initializer list would copy
  doc["displayTimeUnit"] = "ms";
  doc["otherData"] = {{"rank", pid_},
                      {"events_recorded", total},
                      {"events_dropped", total - events.size()},
                      {"clock", "microseconds since the Unix epoch on rank 0's clock"}};
  // A process name that is not UTF-8 (a host name never is) gets U+FFFD, not an exception.
  return doc.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

void Trace::WriteFile(const std::string& path) const {
  // Whole or not at all, and a failure names the file and errno (a full disk: issue 21).
  base::WriteFileAtomically(path, ToJson());
}

void Trace::FlushOnSigusr2(std::string path, void (*on_error)(const std::string&)) {
  if (flusher_.joinable() || g_flush_in_use.exchange(true)) {
    throw std::logic_error("trace: another trace already flushes on SIGUSR2");
  }
  sem_init(&g_flush_sem, 0, 0);
  struct sigaction action {};
  action.sa_handler = OnSigusr2;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR2, &action, &g_old_action);
  handler_installed_ = true;
  flusher_ = std::thread([this, path = std::move(path), on_error] {
    while (true) {
      while (sem_wait(&g_flush_sem) != 0 && errno == EINTR) {
      }
      if (stop_.load()) return;
      try {
        WriteFile(path);
      } catch (const std::exception& e) {
        if (on_error) on_error(e.what());
      }
    }
  });
}

}  // namespace ringpilot::metrics
