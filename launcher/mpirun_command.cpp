#include "launcher/mpirun_command.h"

#include <stdexcept>

#include "slurm/allocation.h"

namespace ringpilot::launcher {
namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

void AddCommonFlags(const MpirunContext& ctx, bool cma, const std::vector<std::string>& user_args,
                    std::vector<std::string>* argv) {
  AppendBaseMpirunFlags(ctx.euid, user_args, ctx.env, cma, argv);
  for (const char* name :
       {kRunDirVar, kRestartVar, kMasterAddrVar, kMasterPortVar, kLaunchTimeVar}) {
    argv->insert(argv->end(), {"-x", name});
  }
  // mpirun passes its own environment only to ranks on this host; `-x` carries the
  // variables that decide libraries, threads and devices to the other hosts as well.
  for (const auto& [name, value] : ctx.env) {
    if (IsForwardedVariable(name)) argv->insert(argv->end(), {"-x", name});
  }
}

// Whether the user chose the shared-memory single-copy mechanism themselves (in
// launch.mpirun_args or OpenMPI's environment variable): a second --mca for the same
// parameter makes mpirun refuse to start.
bool UserSetSingleCopy(const std::vector<std::string>& user_args, const Environment& env) {
  for (const auto& a : user_args) {
    if (a.find("btl_vader_single_copy_mechanism") != std::string::npos) return true;
  }
  return env.count("OMPI_MCA_btl_vader_single_copy_mechanism") > 0;
}

}  // namespace

bool IsForwardedVariable(const std::string& name) {
  return name == "PATH" || name == "LD_LIBRARY_PATH" || name == "OMP_NUM_THREADS" ||
         name == "CUDA_VISIBLE_DEVICES" || StartsWith(name, "NCCL_") ||
         StartsWith(name, "TORCH_") || StartsWith(name, "NVSHMEM_");
}

void AppendBaseMpirunFlags(unsigned euid, const std::vector<std::string>& user_args,
                           const Environment& env, bool cma, std::vector<std::string>* argv) {
  // The trainer binds its own threads to cores from the topology plan; mpirun's default
  // binding would pin each rank to one core first.
  argv->insert(argv->end(), {"--bind-to", "none"});
  if (euid == 0) argv->push_back("--allow-run-as-root");
  // Shared-memory single copy uses CMA (process_vm_readv), which containers and
  // ptrace-restricted kernels refuse: the caller says whether it was tried and worked
  // here; copy-in/copy-out works everywhere. A user's own choice wins.
  if (!UserSetSingleCopy(user_args, env)) {
    argv->insert(argv->end(), {"--mca", "btl_vader_single_copy_mechanism", cma ? "cma" : "none"});
  }
}

MpirunCommand BuildMpirunCommand(const JobConfig& config, const MpirunContext& ctx) {
  const Backend backend = config.launch.backend;
  if (backend != Backend::kLocal && backend != Backend::kMpi && backend != Backend::kSlurm) {
    throw std::invalid_argument(std::string("launch.backend '") + ToString(backend) +
                                "' is not launched with mpirun by 'ringpilot run'");
  }
  MpirunCommand cmd;
  cmd.master_port = config.launch.master_port;
  cmd.argv = {ctx.mpirun, "-np", std::to_string(config.world.size())};
  if (backend == Backend::kLocal) {
    cmd.master_addr = kLocalMasterAddr;
    // One host runs every rank whatever its core count: a laptop runs a 4-rank job.
    cmd.argv.push_back("--oversubscribe");
  } else {
    std::vector<HostSlots> hosts = config.launch.hosts;
    if (backend == Backend::kSlurm) {
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
    for (const HostSlots& h : hosts) {
      cmd.hostfile_content += h.host + " slots=" + std::to_string(h.slots) + "\n";
    }
    // ppr packs procs_per_node consecutive ranks on each node, the layout that
    // `ringpilot exec` and the trainer's node-local communicator assume.
    cmd.argv.insert(cmd.argv.end(),
                    {"--hostfile", cmd.hostfile_path, "--map-by",
                     "ppr:" + std::to_string(config.world.procs_per_node) + ":node"});
  }
  AddCommonFlags(ctx, ctx.cma_works && backend == Backend::kLocal, config.launch.mpirun_args,
                 &cmd.argv);
  cmd.argv.insert(cmd.argv.end(), config.launch.mpirun_args.begin(),
                  config.launch.mpirun_args.end());
  cmd.argv.insert(cmd.argv.end(),
                  {ctx.trainer, "--config", ctx.run_dir + "/job.yaml", "--run-dir", ctx.run_dir});
  return cmd;
}

std::string ShellQuote(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& word : argv) {
    if (!out.empty()) out += ' ';
    bool safe = !word.empty();
    for (const char c : word) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      std::string("_-./:=,+@%").find(c) != std::string::npos;
      safe = safe && ok;
    }
    if (safe) {
      out += word;
      continue;
    }
    out += '\'';
    for (const char c : word) {
      if (c == '\'') {
        out += "'\\''";
      } else {
        out += c;
      }
    }
    out += '\'';
  }
  return out;
}

}  // namespace ringpilot::launcher
