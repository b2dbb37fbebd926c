#include "launcher/mpirun_command.h"

#include <stdexcept>

#include "base/run_variables.h"
#include "mpirun/flags.h"
#include "slurm/allocation.h"

namespace ringpilot::launcher {
namespace {

void AddCommonFlags(const MpirunContext& ctx, bool cma, const std::vector<std::string>& user_args,
                    std::vector<std::string>* argv) {
  mpirun::AppendBaseMpirunFlags(ctx.euid, user_args, ctx.env, cma, argv);
  for (const char* name :
       {base::kRunDirVar, base::kRestartVar, base::kAttemptVar, base::kMaxRestartsVar,
        base::kMasterAddrVar, base::kMasterPortVar, base::kLaunchTimeVar, base::kVerboseVar}) {
    argv->insert(argv->end(), {"-x", name});
  }
  // mpirun passes its own environment only to ranks on this host; `-x` carries the
  // variables that decide libraries, threads and devices to the other hosts as well.
  for (const auto& [name, value] : ctx.env) {
    if (mpirun::IsForwardedVariable(name)) argv->insert(argv->end(), {"-x", name});
  }
}

// A program's interpreter and packages on the other hosts: what an activated venv or conda
// environment sets besides PATH.
constexpr const char* kProgramVariables[] = {"PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX",
                                             "PYTHONUNBUFFERED"};

}  // namespace

base::Environment CommandJobEnv(const config::JobConfig& config, const base::Environment& ctx_env) {
  base::Environment env;
  env[base::kMetricsPortBaseVar] = std::to_string(config.metrics.port_base);
  env[base::kMetricsBindVar] = config.metrics.bind;
  env[base::kJobNameVar] = config.name;
  if (!config.metrics.file_sd_dir.empty()) {
    env[base::kMetricsFileSdDirVar] = config.metrics.file_sd_dir;
  }
  if (ctx_env.count("PYTHONUNBUFFERED") == 0) env["PYTHONUNBUFFERED"] = "1";
  return env;
}

MpirunCommand BuildMpirunCommand(const config::JobConfig& config, const MpirunContext& ctx) {
  const config::Backend backend = config.launch.backend;
  if (backend != config::Backend::kLocal && backend != config::Backend::kMpi &&
      backend != config::Backend::kSlurm) {
    throw std::invalid_argument(std::string("launch.backend '") + config::ToString(backend) +
                                "' is not launched with mpirun by 'ringpilot run'");
  }
  MpirunCommand cmd;
  cmd.master_port = config.launch.master_port;
  cmd.argv = {ctx.mpirun, "-np", std::to_string(config.world.size())};
  if (backend == config::Backend::kLocal) {
    cmd.master_addr = kLocalMasterAddr;
    // One host runs every rank whatever its core count: a laptop runs a 4-rank job.
    cmd.argv.push_back("--oversubscribe");
  } else {
    std::vector<config::HostSlots> hosts = config.launch.hosts;
    if (backend == config::Backend::kSlurm) {
      // Inside the allocation: its nodes are the hosts, and mpirun starts its daemons on
      // them through Slurm (srun).
      hosts.clear();
      for (const auto& h :
           slurm::AllocationHosts(ctx.env, config.world.nodes, config.world.procs_per_node)) {
        hosts.push_back({h.host, h.slots});
      }
    }
    if (hosts.empty()) {
      throw std::invalid_argument("launch.hosts: backend mpi needs at least one host");
    }
    cmd.master_addr = hosts.front().host;
    cmd.hostfile_path = ctx.run_dir + "/hostfile";
    for (const config::HostSlots& h : hosts) {
      cmd.hostfile_content += h.host + " slots=" + std::to_string(h.slots) + "\n";
    }
    // ppr packs procs_per_node consecutive ranks on each node, the layout that
    // `ringpilot exec` and the trainer's node-local communicator assume.
    cmd.argv.insert(cmd.argv.end(),
                    {"--hostfile", cmd.hostfile_path, "--map-by",
                     "ppr:" + std::to_string(config.world.procs_per_node) + ":node"});
  }
  AddCommonFlags(ctx, ctx.cma_works && backend == config::Backend::kLocal,
                 config.launch.mpirun_args, &cmd.argv);
  if (config::RunsCommand(config)) {
    cmd.env = CommandJobEnv(config, ctx.env);
    for (const auto& [name, value] : cmd.env) cmd.argv.insert(cmd.argv.end(), {"-x", name});
    for (const char* name : kProgramVariables) {
      if (ctx.env.count(name) != 0) cmd.argv.insert(cmd.argv.end(), {"-x", name});
    }
  }
  cmd.argv.insert(cmd.argv.end(), config.launch.mpirun_args.begin(),
                  config.launch.mpirun_args.end());
  if (!config::RunsCommand(config)) {
    cmd.argv.insert(cmd.argv.end(),
                    {ctx.trainer, "--config", ctx.run_dir + "/job.yaml", "--run-dir", ctx.run_dir});
    return cmd;
  }
  cmd.argv.insert(cmd.argv.end(), {ctx.ringpilot, "exec", "--log-dir", ctx.run_dir + "/logs",
                                   "--bind", config::ToString(config.placement.bind), "--device",
                                   config::ToString(config.world.device)});
  if (!config.metrics.enabled) cmd.argv.push_back("--no-nccl-metrics");
  cmd.argv.push_back("--");
  cmd.argv.insert(cmd.argv.end(), config.launch.command.begin(), config.launch.command.end());
  return cmd;
}

}  // namespace ringpilot::launcher
