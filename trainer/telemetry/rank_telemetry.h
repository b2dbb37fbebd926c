// Per-rank observability beyond the training metrics: the GPU's identity labels and NVML
// sampler (metrics/gpu_sampler.h), the Chrome trace (metrics/trace.h) written to
// RUN_DIR/trace-rank-N.json at exit (and attempts/N/trace-rank-R.json, the attempt's own
// copy) and on SIGUSR2, and NCCL's per-peer transports read from
// the rank's NCCL log (metrics/nccl_log.h). Keeps trainer.cpp to a few calls.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "metrics/gpu_sampler.h"
#include "metrics/trace.h"
#include "trainer/telemetry/rank_log.h"
#include "trainer/telemetry/training_metrics.h"

namespace ringpilot::trainer::telemetry {

/// Call before the first NCCL call. Unless the user set NCCL_DEBUG (then nothing changes):
/// NCCL_DEBUG=INFO and, unless set, NCCL_DEBUG_SUBSYS=INIT,ENV (INIT prints each channel's
/// transport) and NCCL_DEBUG_FILE=RUN_DIR/logs/nccl-rank-N.log (history::NcclDebugLogPath), so
/// NCCL's lines go to a file, not stderr.
void PrepareNcclDebugLog(const std::string& run_dir, int rank);

/// What RankTelemetry reads of the job (trainer/options.cpp RankTelemetryOptionsFor).
struct RankTelemetryOptions {
  double gpu_sample_seconds = 0;  ///< NVML sampling period of a CUDA rank's GPU; 0 = off
  bool trace = false;             ///< the Chrome trace
  int trace_max_events = 0;       ///< its ring buffer (newest events kept)
};

class RankTelemetry {
 public:
  /// `cuda_device` >= 0: the rank's CUDA device; its NVML identity (UUID, index, PCI bus
  /// id) is added to `id` (identity()), so every rank series carries dcgm-exporter's GPU
  /// labels. -1 on CPU ranks.
  RankTelemetry(const RankTelemetryOptions& options, std::string run_dir, RankIdentity id,
                int cuda_device);
  /// Writes the trace (when enabled) and detaches from the metrics.
  ~RankTelemetry();
  RankTelemetry(const RankTelemetry&) = delete;
  RankTelemetry& operator=(const RankTelemetry&) = delete;

  const RankIdentity& identity() const { return id_; }

  /// Starts the GPU sampler (CUDA ranks, metrics.gpu_sample_seconds > 0) and the trace
  /// (trace.enabled), hooked into `metrics`. `clock_offset` aligns the trace with rank 0.
  /// Problems (no NVML, ...) become one warning line in `log`; nothing here throws for them.
  void Start(TrainingMetrics& metrics, double clock_offset, RankLog& log);

  /// What reads the GPU's clocks and their limits for the stats file (StepStats's
  /// set_gpu_clock_source): GpuSampler::ReadClocks while the sampler runs; empty on CPU
  /// ranks and when NVML sampling is off or found no GPU. Call after Start; the function
  /// must not outlive this object.
  std::function<metrics::GpuClockReading()> ClockSource();

  /// After each step (`steps_done` in this attempt, from 1): after the first and the
  /// 50th step, reads the NCCL log into ringpilot_nccl_transport_info.
  void AfterStep(int64_t steps_done);

 private:
  void ReadNcclTransports();

  const RankTelemetryOptions options_;
  const std::string run_dir_;
  RankIdentity id_;
  const int cuda_device_;
  TrainingMetrics* metrics_ = nullptr;
  RankLog* log_ = nullptr;
  std::unique_ptr<metrics::GpuSampler> sampler_;
  std::unique_ptr<metrics::Trace> trace_;
  bool warned_socket_ = false;
};

}  // namespace ringpilot::trainer::telemetry
