// Exit statuses shared by `ringpilot` and `ringpilot-trainer`: with the job file, the only
// contract between the launcher and the ranks it starts.
#pragma once

namespace ringpilot::base {

inline constexpr int kExitOk = 0;
/// A run failed for good (ranks died more often than launch.max_restarts allows), or a
/// command could not do its work.
inline constexpr int kExitFailure = 1;
/// Bad command line or job file: nothing was started.
inline constexpr int kExitUsage = 2;
/// A rank stopped after SIGUSR1 with a checkpoint of its last step (trainer/startup/preemption.h),
/// and `ringpilot run` for a job stopped that way (EX_TEMPFAIL: run the same run directory
/// again to resume; the Slurm script requeues on it; docs/slurm.md).
inline constexpr int kExitPreempted = 75;
/// `ringpilot run` for a job that `ringpilot stop` stopped: the ranks checkpointed at a step
/// boundary and exited (they exit kExitPreempted; the stop request in the run directory
/// tells the two apart). Not a failure, not a requeue: run the same run directory again to
/// resume. The Slurm script ends the job without requeueing it.
inline constexpr int kExitStopped = 79;
/// A rank failed in a way that repeats on every attempt (EX_CONFIG): the job file, a metrics
/// port in use, a checkpoint this job cannot resume (another model or optimizer), unusable
/// data. `ringpilot run` does not restart such a job and exits with this status too.
inline constexpr int kExitPermanent = 78;
/// `ringpilot exec`: the program exists but cannot be executed (as a shell does).
inline constexpr int kExitNotExecutable = 126;
/// `ringpilot exec`: the program was not found (as a shell does).
inline constexpr int kExitNotFound = 127;

}  // namespace ringpilot::base
