// What the doctor checks share: the GPU gate, the trainer they inspect, and reading small
// files (internal to doctor/).
#pragma once

#include <string>

#include "config/job.h"
#include "doctor/doctor.h"

namespace ringpilot::doctor {

/// The common "does a GPU check apply" gate (gpu.cpp): true with *OUT set (SKIP, or FAIL for
/// the driver and visibility checks with `--device cuda` and no GPU) when it does not.
bool GpuGate(const std::string& name, const DoctorEnv& env, const DriverInfo& drv,
             config::Device dev, bool needs_nvml, CheckResult* out);

/// The trainer CheckTrainerLibraries inspects: $RINGPILOT_TRAINER, else ringpilot-trainer
/// next to the ringpilot executable.
std::string TrainerPath(const DoctorEnv& env);

/// The file's contents with surrounding whitespace removed; "" when unreadable.
std::string ReadTrimmed(const std::string& path);

/// The file's raw bytes; "" when unreadable.
std::string ReadBytes(const std::string& path);

}  // namespace ringpilot::doctor
