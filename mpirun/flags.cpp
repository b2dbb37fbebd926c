#include "mpirun/flags.h"

namespace ringpilot::mpirun {
namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Whether the user chose the shared-memory single-copy mechanism themselves (in
// launch.mpirun_args or OpenMPI's environment variable): a second --mca for the same
// parameter makes mpirun refuse to start.
bool UserSetSingleCopy(const std::vector<std::string>& user_args, const base::Environment& env) {
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
                           const base::Environment& env, bool cma, std::vector<std::string>* argv) {
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

}  // namespace ringpilot::mpirun
