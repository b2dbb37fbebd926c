// Flags and forwarded variables common to every mpirun that ringpilot starts: jobs
// (launcher/), `ringpilot bench comm` (commbench/) and `ringpilot doctor --hosts` (doctor/).
#pragma once

#include <string>
#include <vector>

#include "base/environment.h"

namespace ringpilot::mpirun {

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
                           const base::Environment& env, bool cma, std::vector<std::string>* argv);

}  // namespace ringpilot::mpirun
