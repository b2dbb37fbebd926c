#include "trainer/telemetry/rank_telemetry.h"

#include <cstdlib>
#include <fstream>
#include <vector>

#include "base/files.h"
#include "base/run_variables.h"
#include "history/attempts.h"
#include "history/rank_files.h"
#include "metrics/nccl_log.h"
#include "topology/probe.h"

#ifdef RINGPILOT_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace ringpilot::trainer::telemetry {
namespace {

// The rank's GPU as CUDA numbers it -> its PCI bus id; "" when unknown.
std::string CudaPciBusId(int device) {
#ifdef RINGPILOT_WITH_CUDA
  char buf[32] = {};
  if (device >= 0 && cudaDeviceGetPCIBusId(buf, sizeof buf, device) == cudaSuccess) return buf;
#else
  (void)device;
#endif
  return "";
}

// RUN_DIR/logs/nccl-rank-N.log: where PrepareNcclDebugLog sends NCCL's log.
std::string NcclLogPath(const std::string& run_dir, int rank) {
  return history::NcclDebugLogPath(run_dir + "/logs", rank);
}

}  // namespace

void PrepareNcclDebugLog(const std::string& run_dir, int rank) {
  if (std::getenv("NCCL_DEBUG")) return;  // the user chose a level (and where it goes)
  ::setenv("NCCL_DEBUG", "INFO", 1);
  ::setenv("NCCL_DEBUG_SUBSYS", "INIT,ENV", 0);
  ::setenv("NCCL_DEBUG_FILE", NcclLogPath(run_dir, rank).c_str(), 0);
}

RankTelemetry::RankTelemetry(const RankTelemetryOptions& options, std::string run_dir,
                             RankIdentity id, int cuda_device)
    : options_(options),
      run_dir_(std::move(run_dir)),
      id_(std::move(id)),
      cuda_device_(cuda_device) {
  if (cuda_device_ < 0) return;
  metrics::GpuIdentity gpu;
  std::string error;
  if (metrics::LookupGpuIdentity("libnvidia-ml.so.1", CudaPciBusId(cuda_device_), &gpu, &error)) {
    id_.gpu = gpu;
  }
}

RankTelemetry::~RankTelemetry() {
  if (metrics_) metrics_->set_trace(nullptr);
  sampler_.reset();
  if (!trace_) return;
  const std::string path = history::TracePath(run_dir_, id_.rank);
  try {
    trace_->WriteFile(path);
    // The next attempt rewrites trace-rank-N.json: each attempt's own stays in attempts/N/.
    if (const char* a = std::getenv(base::kAttemptVar); a && std::atoi(a) > 0) {
      const int attempt = std::atoi(a);
      base::MakeDirs(history::AttemptDir(run_dir_, attempt));
      trace_->WriteFile(history::TracePath(history::AttemptDir(run_dir_, attempt), id_.rank));
    }
  } catch (const std::exception& e) {
    if (log_) log_->Warn(std::string("trace: ") + e.what());
  }
}

void RankTelemetry::Start(TrainingMetrics& metrics, double clock_offset, RankLog& log) {
  metrics_ = &metrics;
  log_ = &log;
  if (cuda_device_ >= 0 && options_.gpu_sample_seconds > 0) {
    metrics::GpuSamplerOptions o;
    o.pci_bus_id = CudaPciBusId(cuda_device_);
    o.period_seconds = options_.gpu_sample_seconds;
    sampler_ = std::make_unique<metrics::GpuSampler>(metrics.mutable_families(), o);
    if (!sampler_->active()) {
      log.Warn(sampler_->warning());
      sampler_.reset();
    }
  }
  if (options_.trace) {
    trace_ = std::make_unique<metrics::Trace>(
        id_.rank, "rank " + std::to_string(id_.rank) + " (" + id_.node + ")",
        static_cast<std::size_t>(options_.trace_max_events), clock_offset);
    trace_->FlushOnSigusr2(history::TracePath(run_dir_, id_.rank));
    metrics.set_trace(trace_.get());
  }
}

std::function<metrics::GpuClockReading()> RankTelemetry::ClockSource() {
  if (!sampler_) return {};
  metrics::GpuSampler* sampler = sampler_.get();
  return [sampler] { return sampler->ReadClocks(); };
}

void RankTelemetry::AfterStep(int64_t steps_done) {
  // Connections are made at init or at the first collective that needs them: the first
  // step has them all for data parallelism; read once more later for late ones.
  if (cuda_device_ >= 0 && metrics_ && (steps_done == 1 || steps_done == 50)) {
    ReadNcclTransports();
  }
}

void RankTelemetry::ReadNcclTransports() {
  std::ifstream in(NcclLogPath(run_dir_, id_.rank));
  if (!in) return;  // the user sent NCCL's log elsewhere
  const auto peers = metrics::NcclPeerTransports(in, id_.rank);
  auto& family = metrics_->mutable_families().AddGauge(
      "ringpilot_nccl_transport_info",
      "1 for each transport NCCL uses to connect this rank to a peer (from NCCL's INFO log).");
  bool socket = false;
  for (const auto& [peer, transports] : peers) {
    for (const std::string& t : transports) {
      family.Add({{"peer", std::to_string(peer)}, {"transport", t}}).Set(1);
      socket |= t == "NET_Socket";
    }
  }
  if (!socket || warned_socket_) return;
  std::vector<std::string> warnings;
  for (const topology::Nic& nic : topology::ProbeNics("/sys", &warnings)) {
    if (nic.kind == topology::NicKind::kInfiniBand && nic.IsUp()) {
      warned_socket_ = true;
      log_->Warn("NCCL uses NET/Socket to a peer although InfiniBand port " + nic.name +
                 " is up on " + id_.node +
                 ": check NCCL_IB_DISABLE, NCCL_NET and the IB plugin (see " +
                 NcclLogPath(run_dir_, id_.rank) + ")");
      return;
    }
  }
}

}  // namespace ringpilot::trainer::telemetry
