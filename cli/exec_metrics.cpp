#include "cli/exec_metrics.h"

#include <charconv>
#include <cstdlib>

#include "base/files.h"
#include "base/run_variables.h"
#include "metrics/exporter.h"
#include "metrics/families.h"
#include "metrics/process_metrics.h"
#include "metrics/scrape_targets.h"

namespace ringpilot::cli {
namespace {

int IntOf(const base::Environment& env, const char* name, int fallback) {
  const std::string text = base::Lookup(env, name, "");
  int v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  return r.ec == std::errc() && r.ptr == text.data() + text.size() ? v : fallback;
}

std::string LastComponent(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::unique_ptr<ProgramMetrics> ProgramMetrics::Start(const base::Environment& env,
                                                      std::vector<std::string>* notes) {
  const int port_base = IntOf(env, base::kMetricsPortBaseVar, 0);
  if (port_base <= 0) return nullptr;
  const int rank = IntOf(env, "RANK", 0);
  const int local_rank = IntOf(env, "LOCAL_RANK", rank);
  const int local_size = IntOf(env, "LOCAL_WORLD_SIZE", 1);
  const int world = IntOf(env, "WORLD_SIZE", 1);
  std::unique_ptr<ProgramMetrics> m(new ProgramMetrics());
  metrics::Labels labels{{"Hostname", base::HostName()},
                         {"rank", std::to_string(rank)},
                         {"local_rank", std::to_string(local_rank)}};
  m->families_ = std::make_unique<metrics::Families>(labels);
  // Restarts of the job so far (the attempt's RINGPILOT_RESTART), as the trainer counts them.
  const int restarts = IntOf(env, base::kRestartVar, 0);
  metrics::Counter& restarted =
      m->families_
          ->AddCounter("ringpilot_restarts_total", "Restarts of the job's ranks after a failure.")
          .Add({});
  if (restarts > 0) restarted.Increment(restarts);
  metrics::ExporterOptions o;
  o.bind = metrics::ResolveBind(base::Lookup(env, base::kMetricsBindVar, base::kMetricsBindAuto),
                                env, world > local_size);
  o.port = base::MetricsPort(port_base, local_rank);
  o.port_step = local_size > 0 ? local_size : 1;
  o.port_tries = base::kMetricsPortBlocks;
  try {
    m->exporter_ = std::make_unique<metrics::Exporter>(m->families_->registry(), o);
  } catch (const metrics::ExporterError& e) {
    notes->push_back(std::string("ringpilot exec: no process metrics: ") + e.what());
    return nullptr;
  }
  ProgramMetrics* self = m.get();
  m->exporter_->SetScrapeCallback([self] { self->BeforeScrape(); });
  const std::string run_dir = base::Lookup(env, base::kRunDirVar, "");
  if (!run_dir.empty()) {
    metrics::TargetGroup group;
    group.targets = {m->Target()};
    group.labels = {{"ringpilot_job", base::Lookup(env, base::kJobNameVar, "exec")},
                    {"ringpilot_run", LastComponent(run_dir)}};
    if (m->exporter_->tls()) group.labels["__scheme__"] = "https";
    m->targets_path_ =
        run_dir + "/prometheus-targets-rank-" + std::to_string(rank) + ".process.json";
    try {
      base::WriteFileAtomically(m->targets_path_, metrics::FileSdJson({group}));
    } catch (const base::FileError& e) {
      notes->push_back(std::string("ringpilot exec: ") + e.what());
      m->targets_path_.clear();
    }
  }
  notes->push_back("ringpilot exec: the program's process metrics on http://" + m->Target() +
                   "/metrics");
  return m;
}

ProgramMetrics::~ProgramMetrics() {
  // The rank is gone with its program: no target left for Prometheus to alert on.
  if (!targets_path_.empty()) {
    try {
      base::WriteFileAtomically(targets_path_, "[]\n");
    } catch (const base::FileError&) {
    }
  }
  exporter_.reset();  // no scrape runs BeforeScrape after this
}

std::string ProgramMetrics::Target() const {
  return metrics::TargetHost(exporter_->address()) + ":" + std::to_string(exporter_->port());
}

void ProgramMetrics::Watch(int pid) {
  std::lock_guard<std::mutex> lock(mutex_);
  pid_ = pid;
  process_ = std::make_unique<metrics::ProcessMetrics>(*families_, "/proc", std::to_string(pid));
}

void ProgramMetrics::BeforeScrape() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (process_) process_->Update();
}

}  // namespace ringpilot::cli
