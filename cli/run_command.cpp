#include "cli/run_command.h"

#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <iostream>

#include "base/environment.h"
#include "base/exit_status.h"
#include "base/files.h"
#include "base/run_variables.h"
#include "base/shell.h"
#include "config/job.h"
#include "doctor/command.h"
#include "launcher/mpirun_command.h"
#include "launcher/run_dir.h"
#include "launcher/supervisor.h"
#include "mpirun/cma_probe.h"

namespace ringpilot::cli {
namespace {

constexpr const char* kTrainerName = "ringpilot-trainer";

}  // namespace

// `--set KEY=VALUE`, repeatable, one value per flag so that a job file after it stays
// the positional argument.
void AddSetOption(CLI::App* cmd, std::vector<std::string>* sets) {
  cmd->add_option("--set", *sets, "Override a job key, e.g. --set train.steps=20 (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("KEY=VALUE");
}

int RunValidate(const std::string& job_path, const std::vector<std::string>& sets, bool print) {
  config::JobConfig config;
  try {
    config = config::LoadJobConfig(job_path, sets);
  } catch (const config::ConfigError& e) {
    std::cerr << e.what() << "\n";
    return base::kExitUsage;
  }
  const std::string verdict = job_path + ": valid (" + config.name + ", world size " +
                              std::to_string(config.world.size()) + ", model " +
                              config::ToString(config.model.name) + ")";
  if (print) {
    // stdout carries only the YAML, so that `--print > resolved.yaml` works.
    std::cout << config::EmitJobConfig(config);
    std::cerr << verdict << "\n";
  } else {
    std::cout << verdict << "\n";
  }
  return base::kExitOk;
}

int RunJob(const RunArgs& args) {
  config::JobConfig config;
  try {
    config = config::LoadJobConfig(args.job_path, args.sets);
  } catch (const config::ConfigError& e) {
    std::cerr << e.what() << "\n";
    return base::kExitUsage;
  }
  const config::Backend backend = config.launch.backend;
  if (backend != config::Backend::kLocal && backend != config::Backend::kMpi &&
      backend != config::Backend::kSlurm) {
    std::cerr << args.job_path << ": launch.backend: '" << config::ToString(backend)
              << "' is not supported by 'ringpilot run' yet\n";
    return base::kExitUsage;
  }

  const base::Environment env = base::CurrentEnvironment();
  launcher::MpirunContext ctx;
  ctx.mpirun = base::Lookup(env, "RINGPILOT_MPIRUN", "mpirun");
  const std::string self_dir = base::DirName(base::SelfExecutablePath());
  ctx.trainer = base::Lookup(env, "RINGPILOT_TRAINER", self_dir + "/" + kTrainerName);
  // A relative path would be resolved against each rank's working directory; a bare name
  // is left for mpirun to find on PATH.
  if (ctx.trainer.find('/') != std::string::npos) {
    ctx.trainer = std::filesystem::absolute(ctx.trainer).lexically_normal().string();
  }
  ctx.euid = static_cast<unsigned>(::geteuid());
  ctx.env = env;
  if (backend == config::Backend::kLocal) ctx.cma_works = mpirun::CrossMemoryAttachWorks();
  // A dry run only shows the command, so it works on a machine without the binaries.
  if (!args.dry_run) {
    const std::string path_var = base::Lookup(env, "PATH", "");
    if (base::ResolveExecutable(ctx.trainer, path_var).empty()) {
      std::cerr << "ringpilot: trainer '" << ctx.trainer << "' not found or not executable (build "
                << kTrainerName << ", or set RINGPILOT_TRAINER)\n";
      return base::kExitFailure;
    }
    if (base::ResolveExecutable(ctx.mpirun, path_var).empty()) {
      std::cerr << "ringpilot: mpirun '" << ctx.mpirun
                << "' not found or not executable (install OpenMPI, or set RINGPILOT_MPIRUN)\n";
      return base::kExitFailure;
    }
  }

  std::string chosen = args.run_dir;
  if (chosen.empty()) {
    const std::string base = launcher::DefaultRunDirName(config.name, std::time(nullptr));
    try {
      chosen = args.dry_run ? launcher::UniqueRunDir(base) : launcher::ClaimNewRunDir(base);
    } catch (const base::FileError& e) {
      std::cerr << "ringpilot: " << e.what() << "\n";
      return base::kExitFailure;
    }
  }
  // Absolute, because ranks on other hosts receive it on their command line.
  const launcher::RunDirLayout layout(
      std::filesystem::absolute(std::filesystem::path(chosen)).lexically_normal().string());
  ctx.run_dir = layout.root;
  launcher::MpirunCommand cmd;
  try {
    cmd = launcher::BuildMpirunCommand(config, ctx);
  } catch (const std::invalid_argument& e) {
    std::cerr << args.job_path << ": " << e.what() << "\n";
    return base::kExitUsage;
  }
  const std::string launching = "ringpilot: launching: " + base::ShellJoin(cmd.argv);
  if (args.dry_run) {
    std::cout << launching << "\n";
    return base::kExitOk;
  }

  // A finished run's results are history: running it again with nothing left to train
  // would only overwrite them. Training on (more steps or epochs) keeps the old summary.
  const launcher::FinishedRun finished = launcher::ReadFinishedRun(layout);
  if (finished.finished && (config.train.epochs > 0 ? finished.epochs >= config.train.epochs
                                                    : finished.steps >= config.train.steps)) {
    const std::string done = config.train.epochs > 0 ? std::to_string(finished.epochs) + " epochs"
                                                     : std::to_string(finished.steps) + " steps";
    std::cerr << "ringpilot: " << layout.root << " already finished " << done
              << " (summary.json); raise "
              << (config.train.epochs > 0 ? "train.epochs" : "train.steps")
              << " to train on from its last checkpoint, or choose another --run-dir\n";
    return base::kExitUsage;
  }
  std::string resume_note;
  try {
    const launcher::PreparedRunDir prepared =
        launcher::PrepareRunDir(layout, config::EmitJobConfig(config));
    if (prepared.config_changed) {
      resume_note = "; resuming, previous config kept as job.yaml.prev";
    } else if (prepared.resumed) {
      resume_note = "; resuming with the same config";
    }
    if (finished.finished && launcher::KeepPrevious(layout.summary_json)) {
      resume_note += "; the finished run's summary kept as summary.json.prev";
    }
    if (!cmd.hostfile_path.empty())
      base::WriteFileAtomically(cmd.hostfile_path, cmd.hostfile_content);
  } catch (const base::FileError& e) {
    std::cerr << "ringpilot: " << e.what() << "\n";
    return base::kExitFailure;
  }

  // Quick doctor of this host (docs/doctor.md): RUN_DIR/doctor.json and doctor.prom.
  if (config.launch.preflight &&
      !doctor::RunPreflight(doctor::SystemDoctorEnv(), config.world.device, layout.root, args.force,
                            std::cerr)) {
    return base::kExitFailure;
  }

  launcher::SupervisorOptions options;
  options.max_restarts = config.launch.max_restarts;
  options.start_timeout_s = config.launch.start_timeout_s;
  options.abort_grace_s = config.launch.abort_grace_s;
  options.run_dir = layout.root;
  options.log_path = layout.launcher_log;
  try {
    launcher::Supervisor supervisor(options);
    supervisor.Report("ringpilot: run directory " + layout.root + resume_note);
    supervisor.Report(launching);
    launcher::SupervisedCommand command{cmd.argv, env};
    command.env[base::kMasterAddrVar] = cmd.master_addr;
    command.env[base::kMasterPortVar] = std::to_string(cmd.master_port);
    return supervisor.Run(command).exit_status;
  } catch (const std::runtime_error& e) {
    std::cerr << e.what() << "\n";
    return base::kExitFailure;
  }
}

}  // namespace ringpilot::cli
