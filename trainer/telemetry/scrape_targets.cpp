#include "trainer/telemetry/scrape_targets.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <ATen/ATen.h>

#include "base/files.h"
#include "base/run_variables.h"
#include "config/job.h"
#include "metrics/scrape_targets.h"

namespace ringpilot::trainer::telemetry {
namespace {

// Bytes per rank in the all-gather: a host name or address and a port, NUL-padded.
constexpr int64_t kTargetBytes = 256;

std::string LastComponent(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// FILE_SD_DIR/<run>.json -> RUN_DIR/prometheus-targets.json, made beside and renamed over,
// so Prometheus never reads a missing link.
void LinkIntoFileSdDir(const std::string& dir, const std::string& run_dir) {
  const std::string link = dir + "/" + LastComponent(run_dir) + ".json";
  const std::string tmp = link + ".tmp." + std::to_string(::getpid());
  try {
    base::MakeDirs(dir);
    ::unlink(tmp.c_str());
    if (::symlink(ScrapeTargetsPath(run_dir).c_str(), tmp.c_str()) != 0) {
      base::ThrowFileError(tmp, "create a symlink", errno);
    }
    base::Rename(tmp, link);
  } catch (const base::FileError& e) {
    throw config::ConfigError(std::string("metrics.file_sd_dir: ") + e.what());
  }
}

}  // namespace

std::string ScrapeTargetsPath(const std::string& run_dir) {
  return run_dir + "/" + base::kScrapeTargetsFile;
}

void PublishScrapeTargets(comm::Communicator& host, const metrics::Exporter* exporter,
                          const std::string& job, const std::string& run_dir,
                          const std::string& file_sd_dir) {
  std::string mine;
  if (exporter) {
    mine = metrics::TargetHost(exporter->address()) + ":" + std::to_string(exporter->port());
  }
  if (mine.size() >= static_cast<size_t>(kTargetBytes)) mine.resize(kTargetBytes - 1);
  at::Tensor local = at::zeros({kTargetBytes}, at::kByte);
  std::memcpy(local.data_ptr<uint8_t>(), mine.data(), mine.size());
  at::Tensor all = at::zeros({host.size(), kTargetBytes}, at::kByte);
  host.AllGather(local, all)->Wait();
  if (host.rank() != 0) return;
  metrics::TargetGroup group;
  const auto* bytes = reinterpret_cast<const char*>(all.data_ptr<uint8_t>());
  for (int r = 0; r < host.size(); ++r) {
    const char* t = bytes + r * kTargetBytes;
    const std::string target(t, strnlen(t, kTargetBytes));
    if (!target.empty()) group.targets.push_back(target);
  }
  if (group.targets.empty()) return;
  group.labels = {{"ringpilot_job", job}, {"ringpilot_run", LastComponent(run_dir)}};
  if (exporter && exporter->tls()) group.labels["__scheme__"] = "https";
  base::WriteFileAtomically(ScrapeTargetsPath(run_dir), metrics::FileSdJson({group}));
  if (!file_sd_dir.empty()) LinkIntoFileSdDir(file_sd_dir, run_dir);
}

void WithdrawScrapeTargets(const std::string& run_dir) {
  const std::string path = ScrapeTargetsPath(run_dir);
  try {
    if (base::Exists(path)) base::WriteFileAtomically(path, metrics::FileSdJson({}));
  } catch (const base::FileError&) {
    // The targets stay listed: Prometheus reports them down, which is a nuisance, not a
    // reason to fail a run that finished.
  }
}

}  // namespace ringpilot::trainer::telemetry
