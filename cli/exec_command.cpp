#include "cli/exec_command.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "base/environment.h"
#include "base/exit_status.h"
#include "base/files.h"
#include "base/run_variables.h"
#include "base/shell.h"
#include "base/subprocess.h"
#include "cli/exec_metrics.h"
#include "cli/exec_placement.h"
#include "history/program_beat.h"
#include "history/rank_files.h"
#include "launcher/nccl_metrics_env.h"
#include "launcher/rank_program.h"
#include "launcher/torchrun_env.h"

namespace ringpilot::cli {

int RunExec(const ExecArgs& args) {
  const std::vector<std::string>& command = args.command;
  if (command.empty()) {
    std::cerr << "ringpilot exec: no command given (usage: ringpilot exec -- CMD ARGS...)\n";
    return base::kExitUsage;
  }
  const base::Environment given = base::CurrentEnvironment();
  base::Environment env;
  std::vector<std::string> header;
  try {
    env = launcher::ComputeTorchrunEnv(given);
    if (args.nccl_metrics) {
      const std::string plugin =
          launcher::NcclProfilerPath(env, base::DirName(base::SelfExecutablePath()));
      // NCCL would skip a plugin it cannot load without a word (an INFO line at most):
      // load it here first, so a missing file or library costs one visible line.
      if (::dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL) != nullptr) {
        env = launcher::AddNcclMetricsEnv(env, plugin);
      } else {
        const std::string why = std::string("ringpilot exec: no NCCL metrics: ") + ::dlerror() +
                                " (--no-nccl-metrics turns them off)";
        std::cerr << why << "\n";
        header.push_back(why);
      }
    }
    if (!args.bind.empty()) {
      ExecPlacement placed = PlaceExecRank(env, args.bind, args.device);
      env = std::move(placed.env);
      header.insert(header.end(), placed.lines.begin(), placed.lines.end());
      // The rank's own CPUs are its threads (the trainer's threads_per_rank 0 rule),
      // rather than torchrun's 1, unless the user chose.
      if (placed.bound_cpus > 0 && given.count("OMP_NUM_THREADS") == 0) {
        env["OMP_NUM_THREADS"] = std::to_string(placed.bound_cpus);
      }
    }
  } catch (const launcher::RankEnvError& e) {
    std::cerr << e.what() << "\n";
    return base::kExitUsage;
  } catch (const std::invalid_argument& e) {
    std::cerr << "ringpilot exec: " << e.what() << "\n";
    return base::kExitUsage;
  } catch (const std::runtime_error& e) {
    std::cerr << "ringpilot exec: " << e.what() << "\n";
    return base::kExitUsage;
  }
  const std::string path = base::ResolveExecutable(command[0], base::Lookup(env, "PATH", ""));
  const std::string rank = base::Lookup(env, "RANK", "0");
  if (!args.log_dir.empty()) {
    launcher::RankProgramOptions options;
    options.path = path.empty() ? command[0] : path;
    options.argv = command;
    options.env = env;
    options.log_path = history::RankLogPath(args.log_dir, std::atoi(rank.c_str()));
    options.beat_path = history::ProgramBeatPath(args.log_dir, std::atoi(rank.c_str()));
    options.rank = std::atoi(rank.c_str());
    options.header.push_back("ringpilot exec: rank " + rank + " of " +
                             base::Lookup(env, "WORLD_SIZE", "?") + " (local " +
                             base::Lookup(env, "LOCAL_RANK", "?") + " of " +
                             base::Lookup(env, "LOCAL_WORLD_SIZE", "?") + ", node " +
                             base::Lookup(env, "NODE_RANK", "?") + ") on " + base::HostName() +
                             ", attempt " + base::Lookup(env, base::kAttemptVar, "1") + ", pid " +
                             std::to_string(::getpid()) + ": " + base::ShellJoin(command));
    // The rank's own endpoint: the program's process series, whether or not it loads NCCL.
    std::unique_ptr<ProgramMetrics> program_metrics;
    if (args.nccl_metrics) program_metrics = ProgramMetrics::Start(env, &header);
    if (program_metrics) {
      ProgramMetrics* m = program_metrics.get();
      options.on_start = [m](int pid) { m->Watch(pid); };
    }
    options.header.insert(options.header.end(), header.begin(), header.end());
    try {
      return launcher::RunRankProgram(options);
    } catch (const std::exception& e) {
      std::cerr << e.what() << "\n";
      return base::kExitFailure;
    }
  }
  if (path.empty()) {
    std::cerr << "ringpilot exec: " << command[0] << ": command not found\n";
    return base::kExitNotFound;
  }
  const int err = base::ExecInPlace(path, command, env);
  std::cerr << "ringpilot exec: cannot execute " << path << ": " << std::strerror(err) << "\n";
  return err == ENOENT ? base::kExitNotFound : base::kExitNotExecutable;
}

}  // namespace ringpilot::cli
