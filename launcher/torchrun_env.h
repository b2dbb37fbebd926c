// `ringpilot exec`: maps the rank variables of an MPI or Slurm launcher onto the torchrun
// contract, so that any worker (e.g. a stock PyTorch script calling
// init_process_group("env://")) runs under mpirun, srun or `ringpilot run`.
#pragma once

#include <stdexcept>
#include <string>

#include "base/environment.h"

namespace ringpilot::launcher {

/// MASTER_PORT when nothing else says: torchrun's own default.
inline constexpr int kDefaultTorchrunMasterPort = 29500;
/// Under Slurm the port is derived from the job id so that two jobs sharing a node do not
/// collide: kSlurmPortBase + (SLURM_JOB_ID % kSlurmPortSpan).
inline constexpr int kSlurmPortBase = 20000;
inline constexpr int kSlurmPortSpan = 20000;

/// The torchrun variables could not be derived. `what()` is one line.
class RankEnvError : public std::runtime_error {
 public:
  explicit RankEnvError(const std::string& line) : std::runtime_error(line) {}
};

/// Message when neither MPI nor Slurm rank variables are present.
inline constexpr const char* kNoRankEnvMessage =
    "ringpilot exec: no MPI or Slurm rank environment (run it under mpirun, srun or "
    "ringpilot run)";

/// torchrun's ROLE_NAME: one role, its default name.
inline constexpr const char* kTorchrunRoleName = "default";
/// TORCHELASTIC_RUN_ID when no job says otherwise: torchrun's default rendezvous id.
inline constexpr const char* kTorchrunDefaultRunId = "none";

/// Returns `env` plus the torchrun contract as torch 2.x's LocalElasticAgent sets it for a
/// worker (torch/distributed/elastic/agent/server/local_elastic_agent.py, run.py):
///   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK;
///   GROUP_RANK (= NODE_RANK), GROUP_WORLD_SIZE (nodes: WORLD_SIZE / LOCAL_WORLD_SIZE, or
///     Slurm's node count of the step; left unset when neither is known);
///   ROLE_NAME ("default"), ROLE_RANK (= RANK), ROLE_WORLD_SIZE (= WORLD_SIZE): one role;
///   MASTER_ADDR, MASTER_PORT;
///   TORCHELASTIC_RESTART_COUNT (RINGPILOT_RESTART, else 0), TORCHELASTIC_MAX_RESTARTS
///     (RINGPILOT_MAX_RESTARTS, else 0), TORCHELASTIC_RUN_ID (the Slurm job id, else the
///     name of RINGPILOT_RUN_DIR, else "none" as torchrun's default), and
///     TORCHELASTIC_USE_AGENT_STORE=False (no agent hosts a store: rank 0's
///     init_process_group("env://") creates it, as under torchrun's static rendezvous);
///   TORCH_NCCL_ASYNC_ERROR_HANDLING=1 (torchrun's default);
///   OMP_NUM_THREADS=1 when LOCAL_WORLD_SIZE > 1 (torchrun's run.py does the same, so
///     that the ranks sharing a node do not oversubscribe its cores);
///   RINGPILOT_ATTEMPT: RINGPILOT_RESTART + 1, else 1 (base/run_variables.h).
/// A variable the caller already set is kept as it is.
///
/// Rank source, first that is present:
/// 1. OpenMPI: OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}. NODE_RANK is
///    RANK / LOCAL_WORLD_SIZE, which assumes ranks are packed node by node with the same
///    count on every node -- how ringpilot maps them (`--map-by ppr:K:node`).
///    OMPI_COMM_WORLD_NODE_RANK is not the node index (it is a rank's index among the
///    job's processes on its node) and is not used.
/// 2. MPICH/Hydra PMI: PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS (the last two
///    are required: without them the node layout is unknown); NODE_RANK as for OpenMPI.
/// 3. Slurm: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID; LOCAL_WORLD_SIZE is
///    this node's entry of SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE).
/// MASTER_ADDR: RINGPILOT_MASTER_ADDR, else the first host of SLURM_JOB_NODELIST, else
/// 127.0.0.1 when the whole world is on this node (WORLD_SIZE == LOCAL_WORLD_SIZE).
/// MASTER_PORT: RINGPILOT_MASTER_PORT, else the Slurm job-id port, else 29500.
///
/// Throws RankEnvError with kNoRankEnvMessage when no source is present, and with a line
/// naming the variable when a value is malformed or inconsistent, or MASTER_ADDR cannot
/// be derived for a multi-node world.
base::Environment ComputeTorchrunEnv(const base::Environment& env);

}  // namespace ringpilot::launcher
