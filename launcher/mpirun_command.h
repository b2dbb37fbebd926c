// The mpirun command line that starts one attempt of a job: a pure function of the job
// config and the launch context, so it can be tested without launching anything.
#pragma once

#include <string>
#include <vector>

#include "launcher/job_config.h"
#include "launcher/process_env.h"

namespace ringpilot::launcher {

/// Loopback rendezvous address for backend local.
inline constexpr const char* kLocalMasterAddr = "127.0.0.1";

/// Variables `ringpilot run` sets for every attempt and forwards to all ranks with `-x`.
inline constexpr const char* kRunDirVar = "RINGPILOT_RUN_DIR";
inline constexpr const char* kRestartVar = "RINGPILOT_RESTART";
inline constexpr const char* kMasterAddrVar = "RINGPILOT_MASTER_ADDR";
inline constexpr const char* kMasterPortVar = "RINGPILOT_MASTER_PORT";
/// Unix time (seconds) at which the supervisor started this attempt; the trainer
/// reports time-to-first-step from it.
inline constexpr const char* kLaunchTimeVar = "RINGPILOT_LAUNCH_UNIX";

/// Everything besides the config that the command depends on.
struct MpirunContext {
  std::string mpirun = "mpirun";  ///< argv[0]: RINGPILOT_MPIRUN or `mpirun` (resolved by PATH)
  std::string trainer;            ///< ringpilot-trainer path
  std::string run_dir;            ///< absolute, so that ranks on other hosts find it too
  unsigned euid = 1;              ///< effective uid; 0 adds --allow-run-as-root
  Environment env;                ///< our environment: decides which variables are forwarded
  /// CrossMemoryAttachWorks() on this host (launcher/cma_probe.h); used by backend local
  /// only, where every rank runs here.
  bool cma_works = false;
};

struct MpirunCommand {
  std::vector<std::string> argv;
  /// Backend mpi: where the hostfile goes (RUN_DIR/hostfile) and what it holds
  /// (`host slots=K` lines); both empty for backend local. The caller writes it.
  std::string hostfile_path;
  std::string hostfile_content;
  std::string master_addr;  ///< RINGPILOT_MASTER_ADDR for the ranks
  int master_port = 0;      ///< RINGPILOT_MASTER_PORT for the ranks
};

/// True when `name` is forwarded to the ranks when set: PATH, LD_LIBRARY_PATH,
/// OMP_NUM_THREADS, CUDA_VISIBLE_DEVICES, and every NCCL_*, TORCH_* and NVSHMEM_* variable.
bool IsForwardedVariable(const std::string& name);

/// The flags every mpirun that ringpilot starts carries (jobs, `bench comm`, `doctor
/// --hosts`): `--bind-to none` (ranks bind themselves), `--allow-run-as-root` for euid 0,
/// and `--mca btl_vader_single_copy_mechanism cma` when `cma` (every rank on this host,
/// where CrossMemoryAttachWorks()), else `none`, unless `user_args` or
/// OMPI_MCA_btl_vader_single_copy_mechanism in `env` choose the mechanism (a second
/// value makes mpirun refuse to start).
void AppendBaseMpirunFlags(unsigned euid, const std::vector<std::string>& user_args,
                           const Environment& env, bool cma, std::vector<std::string>* argv);

/// Exit status of a rank that stopped after SIGUSR1 with a checkpoint of its last step
/// (trainer/preemption.h), and of `ringpilot run` for a job stopped that way
/// (EX_TEMPFAIL: run the same run directory again to resume; docs/slurm.md).
inline constexpr int kPreemptedExitStatus = 75;

/// Builds the command for backend local, mpi or slurm:
/// `MPIRUN -np N` + placement (local: `--oversubscribe`; mpi: `--hostfile RUN_DIR/hostfile
/// --map-by ppr:K:node`) + `--bind-to none` [+ `--allow-run-as-root`] +
/// `--mca btl_vader_single_copy_mechanism cma|none` (cma for backend local where
/// `ctx.cma_works`; left out when launch.mpirun_args or
/// OMPI_MCA_btl_vader_single_copy_mechanism chooses it) + `-x` for the RINGPILOT_* variables
/// and each forwarded variable set in `ctx.env` (name order) + launch.mpirun_args verbatim +
/// `TRAINER --config RUN_DIR/job.yaml --run-dir RUN_DIR`.
/// Backend slurm is backend mpi over the allocation in `ctx.env` (slurm::AllocationHosts:
/// the first world.nodes nodes of SLURM_JOB_NODELIST, procs_per_node slots each).
/// Throws std::invalid_argument (one line) for backend k8s (not launched by mpirun from
/// here), backend mpi without hosts, and backend slurm outside a fitting allocation.
MpirunCommand BuildMpirunCommand(const JobConfig& config, const MpirunContext& ctx);

/// `argv` as one line a POSIX shell would split back into the same words: words of safe
/// characters stay bare, others are single-quoted.
std::string ShellQuote(const std::vector<std::string>& argv);

}  // namespace ringpilot::launcher
