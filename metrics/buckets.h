// Histogram bucket layouts of the series that ringpilot's processes share (docs/metrics.md,
// "Buckets"): each spans the range its quantity really takes, and each bucket costs one
// series per label set, so the layouts are chosen rather than generated.
#pragma once

#include <array>
#include <vector>

namespace ringpilot::metrics {

/// `ringpilot_step_seconds`: 1 ms .. 60 s. Between 5 ms and 5 s (GPU steps of small to
/// large models, CPU steps of small ones) bounds follow the Renard R10 series (ratio 1.25),
/// so a quantile read with histogram_quantile is within about 12% of the true one; coarse
/// outside that band.
inline constexpr std::array<double, 35> kStepSecondsBounds = {
    0.001, 0.0025, 0.005, 0.0063, 0.008, 0.01, 0.0125, 0.016, 0.02, 0.025, 0.032, 0.04,
    0.05,  0.063,  0.08,  0.1,    0.125, 0.16, 0.2,    0.25,  0.32, 0.4,   0.5,   0.63,
    0.8,   1,      1.25,  1.6,    2,     2.5,  3.2,    4,     5,    10,    60};

/// `ringpilot_collective_seconds` (trainer and NCCL profiler plugin): 25 us (a small NCCL
/// all-reduce over NVLink) .. 2.5 s (a large MPI all-reduce between CPU ranks), 1-2.5-5 per
/// decade.
inline constexpr std::array<double, 16> kCollectiveSecondsBounds = {
    2.5e-5, 5e-5,  1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
    0.01,   0.025, 0.05, 0.1,    0.25, 0.5,  1,      2.5};

/// `ringpilot_step_phase_seconds`: 100 us .. 5 s, 1-2.5-5 per decade from 1 ms.
inline constexpr std::array<double, 11> kPhaseSecondsBounds = {
    1e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 5};

/// `ringpilot_checkpoint_seconds`: 0.1 s .. 10 min (a small model to a local disk, a large
/// one to a shared file system).
inline constexpr std::array<double, 10> kCheckpointSecondsBounds = {0.1, 0.25, 0.5, 1,   2.5,
                                                                    5,   10,   30,  120, 600};

/// The bounds as prometheus::Histogram::BucketBoundaries wants them.
template <std::size_t N>
std::vector<double> BucketsOf(const std::array<double, N>& bounds) {
  return std::vector<double>(bounds.begin(), bounds.end());
}

}  // namespace ringpilot::metrics
