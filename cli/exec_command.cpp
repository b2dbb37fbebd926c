#include "cli/exec_command.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "base/environment.h"
#include "base/exit_status.h"
#include "base/files.h"
#include "launcher/nccl_metrics_env.h"
#include "launcher/torchrun_env.h"

namespace ringpilot::cli {

int RunExec(const std::vector<std::string>& command, bool nccl_metrics) {
  if (command.empty()) {
    std::cerr << "ringpilot exec: no command given (usage: ringpilot exec -- CMD ARGS...)\n";
    return base::kExitUsage;
  }
  base::Environment env;
  try {
    env = launcher::ComputeTorchrunEnv(base::CurrentEnvironment());
    if (nccl_metrics) {
      const std::string plugin =
          launcher::NcclProfilerPath(env, base::DirName(base::SelfExecutablePath()));
      // NCCL would skip a plugin it cannot load without a word (an INFO line at most):
      // load it here first, so a missing file or library costs one visible line.
      if (::dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL) != nullptr) {
        env = launcher::AddNcclMetricsEnv(env, plugin);
      } else {
        std::cerr << "ringpilot exec: no NCCL metrics: " << ::dlerror()
                  << " (--no-nccl-metrics turns them off)\n";
      }
    }
  } catch (const launcher::RankEnvError& e) {
    std::cerr << e.what() << "\n";
    return base::kExitUsage;
  }
  const std::string path = base::ResolveExecutable(command[0], base::Lookup(env, "PATH", ""));
  if (path.empty()) {
    std::cerr << "ringpilot exec: " << command[0] << ": command not found\n";
    return base::kExitNotFound;
  }
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::vector<std::string> env_strings = base::ToEnvStrings(env);
  std::vector<char*> envp;
  for (const std::string& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  ::execve(path.c_str(), argv.data(), envp.data());
  const int err = errno;
  std::cerr << "ringpilot exec: cannot execute " << path << ": " << std::strerror(err) << "\n";
  return err == ENOENT ? base::kExitNotFound : base::kExitNotExecutable;
}

}  // namespace ringpilot::cli
