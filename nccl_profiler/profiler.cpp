#include "nccl_profiler/profiler.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <utility>

#include "base/environment.h"
#include "base/files.h"
#include "metrics/exporter.h"
#include "metrics/scrape_targets.h"
#include "nccl_profiler/prometheus_export.h"
#include "nccl_profiler/stats_file.h"

namespace ringpilot::nccl_profiler {
namespace {

// The stats file is for diagnosis (the live view is /metrics), and it is fsync'ed: every
// few seconds is enough. It is written even when nothing changed: its `written_unix` is the
// rank's heartbeat (a stuck rank's file stays fresh, a stopped or dead one's goes stale).
constexpr auto kStatsPeriod = std::chrono::seconds(5);

std::atomic<bool> g_exiting{false};

void WriteAtExit() {
  g_exiting.store(true);
  Profiler::Instance().WriteStatsFile();
  Profiler::Instance().WithdrawScrapeTarget();
}

std::string LastComponent(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

Profiler& Profiler::Instance() {
  // Never destroyed: see profiler.h (lifetime).
  static Profiler* const instance = new Profiler();
  return *instance;
}

Profiler::Profiler() = default;

void Profiler::Disable(const std::string& reason) {
  disabled_.store(true, std::memory_order_release);
  if (!reported_.exchange(true)) {
    std::fprintf(stderr, "ringpilot-nccl-profiler: disabled: %s\n", reason.c_str());
    std::fflush(stderr);
  }
}

void Profiler::Start(const CommIdentity& first, int api_version) {
  settings_ = SettingsFromEnvironment(base::CurrentEnvironment(), first.rank);
  api_version_ = api_version;
  rank_ = settings_.rank;
  RankLabels labels;
  labels.job = settings_.job;
  labels.node = base::HostName();
  labels.rank = rank_;
  labels.local_rank = settings_.local_rank;
  export_ = std::make_unique<PrometheusExport>(labels, api_version);
  if (settings_.port >= 0) {
    metrics::ExporterOptions o;
    o.bind = metrics::ResolveBind(settings_.bind, base::CurrentEnvironment(), settings_.multi_node);
    o.port = settings_.port;
    o.port_step = settings_.port_step;
    o.port_tries = settings_.port_tries;
    exporter_ = std::make_unique<metrics::Exporter>(export_->families().registry(), o);
    exporter_->SetScrapeCallback([this] { export_->Refresh(Snapshots()); });
  }
  if (!settings_.run_dir.empty()) {
    stats_path_ = history::NcclRecordPath(settings_.run_dir + "/logs", rank_);
    base::MakeDirs(base::DirName(stats_path_));
    if (exporter_) {
      // No MPI here to gather the ranks into one file: each process lists itself, and
      // a file_sd glob RUN_DIR/prometheus-targets*.json finds them all.
      metrics::TargetGroup group;
      group.targets = {metrics::TargetHost(exporter_->address()) + ":" +
                       std::to_string(exporter_->port())};
      group.labels = {{"ringpilot_job", settings_.job},
                      {"ringpilot_run", LastComponent(settings_.run_dir)}};
      const std::string name = "prometheus-targets-rank-" + std::to_string(rank_) + ".json";
      const std::string path = settings_.run_dir + "/" + name;
      base::WriteFileAtomically(path, metrics::FileSdJson({group}));
      targets_path_ = path;
      if (!settings_.file_sd_dir.empty()) {
        // DIR/<run>-rank-N.json -> the file: one glob over DIR finds every run's processes.
        const std::string link = settings_.file_sd_dir + "/" + LastComponent(settings_.run_dir) +
                                 "-rank-" + std::to_string(rank_) + ".json";
        base::MakeDirs(settings_.file_sd_dir);
        const std::string tmp = link + ".tmp";
        ::unlink(tmp.c_str());
        if (::symlink(path.c_str(), tmp.c_str()) != 0) {
          base::ThrowFileError(tmp, "create a symlink", errno);
        }
        base::Rename(tmp, link);
      }
    }
    writer_ = std::thread([this] { WriterLoop(); });
    std::atexit(WriteAtExit);
  }
}

CommStats* Profiler::AddCommunicator(const CommIdentity& id, Timing timing, int api_version) {
  if (disabled()) return nullptr;
  std::string error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    try {
      if (!started_) {
        started_ = true;
        Start(id, api_version);
      }
      live_.push_back(std::make_unique<CommStats>(id, timing));
      return live_.back().get();
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "unknown error";
    }
  }
  Disable(error);
  return nullptr;
}

void Profiler::FinalizeCommunicator(CommStats* comm) {
  if (comm == nullptr) return;
  comm->Finalize();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(live_.begin(), live_.end(),
                           [comm](const std::unique_ptr<CommStats>& c) { return c.get() == comm; });
    if (it == live_.end()) return;
    retired_.push_back((*it)->Snapshot());
    if (retired_.size() > kMaxRetired) retired_.erase(retired_.begin());
    live_.erase(it);
  }
  WriteStatsFile();
}

std::vector<CommSnapshot> Profiler::SnapshotsLocked() {
  std::vector<CommSnapshot> all = retired_;
  for (const auto& c : live_) all.push_back(c->Snapshot());
  return all;
}

std::vector<CommSnapshot> Profiler::Snapshots() {
  std::lock_guard<std::mutex> lock(mu_);
  return SnapshotsLocked();
}

void Profiler::WriteStatsFile() {
  std::lock_guard<std::mutex> write_lock(write_mu_);
  if (stats_path_.empty()) return;
  std::string text;
  {
    std::lock_guard<std::mutex> lock(mu_);
    RankLabels labels;
    labels.job = settings_.job;
    labels.node = base::HostName();
    labels.rank = rank_;
    labels.local_rank = settings_.local_rank;
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    text = history::NcclRecordJson(StatsRecord(labels, api_version_, SnapshotsLocked(), now));
  }
  try {
    base::WriteFileAtomically(stats_path_, text);
  } catch (const std::exception& e) {
    // Prometheus export goes on; the file is not retried.
    const std::string reason = e.what();
    stats_path_.clear();
    if (!reported_.exchange(true)) {
      std::fprintf(stderr, "ringpilot-nccl-profiler: stats file off: %s\n", reason.c_str());
      std::fflush(stderr);
    }
  }
}

void Profiler::WithdrawScrapeTarget() {
  std::lock_guard<std::mutex> lock(mu_);
  if (targets_path_.empty()) return;
  try {
    base::WriteFileAtomically(targets_path_, metrics::FileSdJson({}));
  } catch (const std::exception&) {
    // The target stays listed (and reported down): exit goes on.
  }
}

void Profiler::WriterLoop() {
  std::mutex m;
  std::unique_lock<std::mutex> lock(m);
  while (!g_exiting.load()) {
    wake_.wait_for(lock, kStatsPeriod);
    if (g_exiting.load()) break;
    WriteStatsFile();
  }
}

}  // namespace ringpilot::nccl_profiler
