// The mpirun command line that starts one attempt of a job: a pure function of the job
// config and the launch context, so it can be tested without launching anything.
#pragma once

#include <string>
#include <vector>

#include "base/environment.h"
#include "config/job.h"

namespace ringpilot::launcher {

/// Loopback rendezvous address for backend local.
inline constexpr const char* kLocalMasterAddr = "127.0.0.1";

/// Everything besides the config that the command depends on.
struct MpirunContext {
  std::string mpirun = "mpirun";  ///< argv[0]: RINGPILOT_MPIRUN or `mpirun` (resolved by PATH)
  std::string trainer;            ///< ringpilot-trainer path (jobs without launch.command)
  /// The `ringpilot` executable the ranks of a launch.command job run as `ringpilot exec`
  /// (absolute: the same path on every host).
  std::string ringpilot;
  std::string run_dir;    ///< absolute, so that ranks on other hosts find it too
  unsigned euid = 1;      ///< effective uid; 0 adds --allow-run-as-root
  base::Environment env;  ///< our environment: decides which variables are forwarded
  /// CrossMemoryAttachWorks() on this host (mpirun/cma_probe.h); used by backend local
  /// only, where every rank runs here.
  bool cma_works = false;
};

struct MpirunCommand {
  std::vector<std::string> argv;
  /// config::Backend mpi: where the hostfile goes (RUN_DIR/hostfile) and what it holds
  /// (`host slots=K` lines); both empty for backend local. The caller writes it.
  std::string hostfile_path;
  std::string hostfile_content;
  std::string master_addr;  ///< RINGPILOT_MASTER_ADDR for the ranks
  int master_port = 0;      ///< RINGPILOT_MASTER_PORT for the ranks
  /// More variables for mpirun's environment, each forwarded to the ranks with `-x` in
  /// `argv` (launch.command jobs: the metrics settings of the NCCL profiler plugin).
  base::Environment env;
};

/// What a launch.command job's ranks get besides the torchrun variables: the NCCL
/// profiler plugin's settings from metrics.* and the job name (RINGPILOT_METRICS_PORT_BASE,
/// RINGPILOT_METRICS_BIND, RINGPILOT_JOB_NAME, and RINGPILOT_METRICS_FILE_SD_DIR when
/// metrics.file_sd_dir is set), and PYTHONUNBUFFERED=1 unless `ctx_env`
/// sets it (a rank's lines reach its log as they are printed, and none are lost when it is
/// killed).
base::Environment CommandJobEnv(const config::JobConfig& config, const base::Environment& ctx_env);

/// Builds the command for backend local, mpi or slurm:
/// `MPIRUN -np N` + placement (local: `--oversubscribe`; mpi: `--hostfile RUN_DIR/hostfile
/// --map-by ppr:K:node`) + `--bind-to none` [+ `--allow-run-as-root`] +
/// `--mca btl_vader_single_copy_mechanism cma|none` (cma for backend local where
/// `ctx.cma_works`; left out when launch.mpirun_args or
/// OMPI_MCA_btl_vader_single_copy_mechanism chooses it) + `-x` for the RINGPILOT_* variables
/// (run dir, attempt, master address and port, launch time, verbose: the caller sets them)
/// and each forwarded variable set in `ctx.env` (name order) + launch.mpirun_args verbatim +
/// `TRAINER --config RUN_DIR/job.yaml --run-dir RUN_DIR`; for a launch.command job instead
/// `-x` for CommandJobEnv's variables and PYTHONPATH, VIRTUAL_ENV, CONDA_PREFIX,
/// PYTHONUNBUFFERED when set,
/// then `RINGPILOT exec --log-dir RUN_DIR/logs --bind placement.bind --device world.device
/// [--no-nccl-metrics (metrics.enabled false)] -- COMMAND...`.
/// config::Backend slurm is backend mpi over the allocation in `ctx.env` (slurm::AllocationHosts:
/// the first world.nodes nodes of SLURM_JOB_NODELIST, procs_per_node slots each).
/// Throws std::invalid_argument (one line) for backend k8s (not launched by mpirun from
/// here), backend mpi without hosts, and backend slurm outside a fitting allocation.
MpirunCommand BuildMpirunCommand(const config::JobConfig& config, const MpirunContext& ctx);

}  // namespace ringpilot::launcher
