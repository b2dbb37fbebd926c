#include "launcher/torchrun_env.h"

#include <cctype>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "base/run_variables.h"
#include "slurm/slurm_env.h"

namespace ringpilot::launcher {
namespace {

// The rank layout one launcher reported, before MASTER_ADDR/PORT are decided.
struct Layout {
  std::string source;  // for messages: "OpenMPI", "PMI", "Slurm"
  int rank = 0;
  int world_size = 0;
  int local_rank = 0;
  int local_world_size = 0;
  std::optional<int> node_rank;  // known directly (Slurm); else derived from the packing
  std::optional<int> nodes;      // known directly (Slurm); else derived from the packing
};

const std::string* Find(const base::Environment& env, const char* name) {
  const auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

int ParseNonNegative(const char* name, const std::string& value) {
  bool ok = !value.empty() && value.size() <= 9;
  for (const char c : value) ok = ok && std::isdigit(static_cast<unsigned char>(c));
  if (!ok) {
    throw RankEnvError("ringpilot exec: " + std::string(name) + "='" + value +
                       "' is not a non-negative integer");
  }
  return std::stoi(value);
}

int Require(const base::Environment& env, const char* name, const std::string& because) {
  const std::string* value = Find(env, name);
  if (value == nullptr) {
    throw RankEnvError("ringpilot exec: " + because + " is set but " + name + " is not");
  }
  return ParseNonNegative(name, *value);
}

std::optional<Layout> FromOpenMpi(const base::Environment& env) {
  if (Find(env, "OMPI_COMM_WORLD_RANK") == nullptr) return std::nullopt;
  const std::string why = "OMPI_COMM_WORLD_RANK";
  Layout l;
  l.source = "OpenMPI";
  l.rank = Require(env, "OMPI_COMM_WORLD_RANK", why);
  l.world_size = Require(env, "OMPI_COMM_WORLD_SIZE", why);
  l.local_rank = Require(env, "OMPI_COMM_WORLD_LOCAL_RANK", why);
  l.local_world_size = Require(env, "OMPI_COMM_WORLD_LOCAL_SIZE", why);
  return l;
}

std::optional<Layout> FromPmi(const base::Environment& env) {
  if (Find(env, "PMI_RANK") == nullptr) return std::nullopt;
  const std::string why = "PMI_RANK";
  Layout l;
  l.source = "PMI";
  l.rank = Require(env, "PMI_RANK", why);
  l.world_size = Require(env, "PMI_SIZE", why);
  l.local_rank = Require(env, "MPI_LOCALRANKID", why);
  l.local_world_size = Require(env, "MPI_LOCALNRANKS", why);
  return l;
}

std::optional<Layout> FromSlurm(const std::optional<slurm::SlurmEnv>& s) {
  if (!s || !s->procid) return std::nullopt;
  Layout l;
  l.source = "Slurm";
  l.rank = *s->procid;
  l.world_size = *s->ntasks;
  if (s->localid < 0 || s->nodeid < 0) {
    throw RankEnvError(
        "ringpilot exec: SLURM_PROCID is set but SLURM_LOCALID or SLURM_NODEID is not (run it "
        "in a job step: srun ... ringpilot exec -- CMD)");
  }
  const std::optional<int> local_tasks = s->LocalTasks();
  if (!local_tasks) {
    throw RankEnvError(
        "ringpilot exec: SLURM_PROCID is set but neither SLURM_STEP_TASKS_PER_NODE nor "
        "SLURM_TASKS_PER_NODE is");
  }
  l.local_rank = s->localid;
  l.local_world_size = *local_tasks;
  l.node_rank = s->nodeid;
  l.nodes = static_cast<int>(s->tasks_per_node.size());
  return l;
}

void CheckConsistent(const Layout& l) {
  const auto fail = [&](const std::string& problem) {
    throw RankEnvError("ringpilot exec: inconsistent " + l.source +
                       " rank environment: " + problem);
  };
  if (l.world_size <= 0) fail("world size is 0");
  if (l.rank >= l.world_size) {
    fail("rank " + std::to_string(l.rank) + " >= world size " + std::to_string(l.world_size));
  }
  if (l.local_world_size <= 0 || l.local_world_size > l.world_size) {
    fail("local world size " + std::to_string(l.local_world_size) + " outside 1.." +
         std::to_string(l.world_size));
  }
  if (l.local_rank >= l.local_world_size) {
    fail("local rank " + std::to_string(l.local_rank) + " >= local world size " +
         std::to_string(l.local_world_size));
  }
}

// Sets `name` unless the user already did.
void SetDefault(base::Environment* env, const char* name, const std::string& value) {
  env->emplace(name, value);
}

}  // namespace

base::Environment ComputeTorchrunEnv(const base::Environment& env) {
  // Parse Slurm first even when MPI provides the ranks: mpirun inside an allocation still
  // takes MASTER_ADDR/PORT from the allocation, and malformed values should be reported.
  std::optional<slurm::SlurmEnv> slurm_env;
  try {
    slurm_env = slurm::ParseSlurmEnv(env);
  } catch (const std::invalid_argument& e) {
    throw RankEnvError(std::string("ringpilot exec: ") + e.what());
  }

  std::optional<Layout> layout = FromOpenMpi(env);
  if (!layout) layout = FromPmi(env);
  if (!layout) layout = FromSlurm(slurm_env);
  if (!layout) throw RankEnvError(kNoRankEnvMessage);
  CheckConsistent(*layout);

  base::Environment out = env;
  SetDefault(&out, "RANK", std::to_string(layout->rank));
  SetDefault(&out, "WORLD_SIZE", std::to_string(layout->world_size));
  SetDefault(&out, "LOCAL_RANK", std::to_string(layout->local_rank));
  SetDefault(&out, "LOCAL_WORLD_SIZE", std::to_string(layout->local_world_size));

  std::optional<int> node_rank = layout->node_rank;
  // MPI launchers do not export a node index. Packed, even placement makes it the
  // quotient; with uneven counts per node the quotient would be wrong for some ranks.
  if (!node_rank && layout->world_size % layout->local_world_size == 0) {
    node_rank = layout->rank / layout->local_world_size;
  }
  std::optional<int> nodes = layout->nodes;
  if (!nodes && layout->world_size % layout->local_world_size == 0) {
    nodes = layout->world_size / layout->local_world_size;
  }
  if (nodes) SetDefault(&out, "GROUP_WORLD_SIZE", std::to_string(*nodes));
  SetDefault(&out, "ROLE_NAME", kTorchrunRoleName);
  SetDefault(&out, "ROLE_RANK", out.at("RANK"));
  SetDefault(&out, "ROLE_WORLD_SIZE", out.at("WORLD_SIZE"));
  if (node_rank) {
    SetDefault(&out, "NODE_RANK", std::to_string(*node_rank));
    SetDefault(&out, "GROUP_RANK", out.at("NODE_RANK"));
  } else if (out.count("NODE_RANK") == 0) {
    throw RankEnvError("ringpilot exec: cannot derive NODE_RANK: " + layout->source +
                       " world size " + std::to_string(layout->world_size) +
                       " is not a multiple of local world size " +
                       std::to_string(layout->local_world_size) + " (set NODE_RANK yourself)");
  } else {
    SetDefault(&out, "GROUP_RANK", out.at("NODE_RANK"));
  }

  if (out.count("MASTER_ADDR") == 0) {
    if (const std::string* addr = Find(env, "RINGPILOT_MASTER_ADDR")) {
      out["MASTER_ADDR"] = *addr;
    } else if (slurm_env && !slurm_env->nodes.empty()) {
      out["MASTER_ADDR"] = slurm_env->nodes.front();
    } else if (layout->world_size == layout->local_world_size) {
      out["MASTER_ADDR"] = "127.0.0.1";
    } else {
      throw RankEnvError("ringpilot exec: cannot choose MASTER_ADDR for a " +
                         std::to_string(layout->world_size) +
                         "-rank world spread over several nodes (set RINGPILOT_MASTER_ADDR or "
                         "MASTER_ADDR)");
    }
  }
  if (out.count("MASTER_PORT") == 0) {
    int port = kDefaultTorchrunMasterPort;
    if (const std::string* text = Find(env, "RINGPILOT_MASTER_PORT")) {
      port = ParseNonNegative("RINGPILOT_MASTER_PORT", *text);
      if (port < 1 || port > 65535) {
        throw RankEnvError("ringpilot exec: RINGPILOT_MASTER_PORT='" + *text +
                           "' is not a port number (1-65535)");
      }
    } else if (slurm_env && slurm_env->job_id) {
      port = kSlurmPortBase + static_cast<int>(*slurm_env->job_id % kSlurmPortSpan);
    }
    out["MASTER_PORT"] = std::to_string(port);
  }

  // The elastic agent's variables: ringpilot's supervisor is the agent here (whole-job
  // restarts), so its restart count and limit are torchrun's.
  int restart = 0;
  if (const std::string* text = Find(env, base::kRestartVar)) {
    restart = ParseNonNegative(base::kRestartVar, *text);
  }
  SetDefault(&out, "TORCHELASTIC_RESTART_COUNT", std::to_string(restart));
  SetDefault(&out, base::kAttemptVar, std::to_string(restart + 1));
  int max_restarts = 0;
  if (const std::string* text = Find(env, base::kMaxRestartsVar)) {
    max_restarts = ParseNonNegative(base::kMaxRestartsVar, *text);
  }
  SetDefault(&out, "TORCHELASTIC_MAX_RESTARTS", std::to_string(max_restarts));
  std::string run_id = kTorchrunDefaultRunId;
  const std::string* run_dir = Find(env, base::kRunDirVar);
  if (slurm_env && slurm_env->job_id) {
    run_id = std::to_string(*slurm_env->job_id);
  } else if (run_dir != nullptr && !run_dir->empty()) {
    std::string dir = *run_dir;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    const std::string name = dir.substr(dir.find_last_of('/') + 1);
    if (!name.empty()) run_id = name;
  }
  SetDefault(&out, "TORCHELASTIC_RUN_ID", run_id);
  SetDefault(&out, "TORCHELASTIC_USE_AGENT_STORE", "False");
  SetDefault(&out, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
  if (layout->local_world_size > 1) SetDefault(&out, "OMP_NUM_THREADS", "1");
  return out;
}

}  // namespace ringpilot::launcher
