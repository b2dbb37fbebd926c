// Environment variables `ringpilot run` sets for every attempt and forwards to all ranks
// (mpirun -x); the trainer reads them. One definition for both sides.
#pragma once

namespace ringpilot::base {

/// The run directory (absolute, so ranks on other hosts find it too).
inline constexpr const char* kRunDirVar = "RINGPILOT_RUN_DIR";
/// Attempt number: 0 for the first attempt, then 1, 2, ... after restarts.
inline constexpr const char* kRestartVar = "RINGPILOT_RESTART";
/// Rendezvous address and port for `ringpilot exec` workers (torchrun's MASTER_ADDR/PORT).
inline constexpr const char* kMasterAddrVar = "RINGPILOT_MASTER_ADDR";
inline constexpr const char* kMasterPortVar = "RINGPILOT_MASTER_PORT";
/// Unix time (seconds) at which the supervisor started this attempt; the trainer reports
/// time-to-first-step from it.
inline constexpr const char* kLaunchTimeVar = "RINGPILOT_LAUNCH_UNIX";

}  // namespace ringpilot::base
