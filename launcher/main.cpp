// `ringpilot`: the front end. validate checks a job file, run launches and supervises it
// under mpirun, exec gives any worker the torchrun environment.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "launcher/bench_command.h"
#include "launcher/cma_probe.h"
#include "launcher/diagnose_command.h"
#include "launcher/doctor_command.h"
#include "launcher/job_config.h"
#include "launcher/k8s_command.h"
#include "launcher/mpirun_command.h"
#include "launcher/process_env.h"
#include "launcher/run_dir.h"
#include "launcher/slurm_command.h"
#include "launcher/supervisor.h"
#include "launcher/topo_command.h"
#include "launcher/torchrun_env.h"

namespace ringpilot::launcher {
namespace {

// Exit statuses of the front end itself (a job's own status passes through `run`).
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;      // environment problem: missing binary, unwritable dir
constexpr int kExitBadInput = 2;     // invalid job file, override or command line
constexpr int kExitNotFound = 127;   // exec: command not found (as a shell says)
constexpr int kExitCannotRun = 126;  // exec: found but not executable

constexpr const char* kTrainerName = "ringpilot-trainer";

// `--set KEY=VALUE`, repeatable, one value per flag so that a job file after it stays
// the positional argument.
void AddSetOption(CLI::App* cmd, std::vector<std::string>* sets) {
  cmd->add_option("--set", *sets, "Override a job key, e.g. --set train.steps=20 (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("KEY=VALUE");
}

// The directory this executable is in, from /proc/self/exe; "" when unknown.
std::string SelfDirectory() { return ParentDirectory(SelfExecutablePath()); }

std::string Lookup(const Environment& env, const char* name, const std::string& fallback) {
  const auto it = env.find(name);
  return it == env.end() || it->second.empty() ? fallback : it->second;
}

int Validate(const std::string& job_path, const std::vector<std::string>& sets, bool print) {
  JobConfig config;
  try {
    config = LoadJobConfig(job_path, sets);
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\n";
    return kExitBadInput;
  }
  const std::string verdict = job_path + ": valid (" + config.name + ", world size " +
                              std::to_string(config.world.size()) + ", model " + config.model.name +
                              ")";
  if (print) {
    // stdout carries only the YAML, so that `--print > resolved.yaml` works.
    std::cout << EmitJobConfig(config);
    std::cerr << verdict << "\n";
  } else {
    std::cout << verdict << "\n";
  }
  return kExitOk;
}

struct RunArgs {
  std::string job_path;
  std::vector<std::string> sets;
  std::string run_dir;
  bool dry_run = false;
  bool force = false;  ///< start even when the preflight doctor FAILs
};

int Run(const RunArgs& args) {
  JobConfig config;
  try {
    config = LoadJobConfig(args.job_path, args.sets);
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\n";
    return kExitBadInput;
  }
  const Backend backend = config.launch.backend;
  if (backend != Backend::kLocal && backend != Backend::kMpi && backend != Backend::kSlurm) {
    std::cerr << args.job_path << ": launch.backend: '" << ToString(backend)
              << "' is not supported by 'ringpilot run' yet\n";
    return kExitBadInput;
  }

  const Environment env = CurrentEnvironment();
  MpirunContext ctx;
  ctx.mpirun = Lookup(env, "RINGPILOT_MPIRUN", "mpirun");
  const std::string self_dir = SelfDirectory();
  ctx.trainer = Lookup(env, "RINGPILOT_TRAINER",
                       (self_dir.empty() ? std::string(".") : self_dir) + "/" + kTrainerName);
  // A relative path would be resolved against each rank's working directory; a bare name
  // is left for mpirun to find on PATH.
  if (ctx.trainer.find('/') != std::string::npos) {
    ctx.trainer = std::filesystem::absolute(ctx.trainer).lexically_normal().string();
  }
  ctx.euid = static_cast<unsigned>(::geteuid());
  ctx.env = env;
  if (backend == Backend::kLocal) ctx.cma_works = CrossMemoryAttachWorks();
  // A dry run only shows the command, so it works on a machine without the binaries.
  if (!args.dry_run) {
    const std::string path_var = Lookup(env, "PATH", "");
    if (ResolveExecutable(ctx.trainer, path_var).empty()) {
      std::cerr << "ringpilot: trainer '" << ctx.trainer << "' not found or not executable (build "
                << kTrainerName << ", or set RINGPILOT_TRAINER)\n";
      return kExitFailure;
    }
    if (ResolveExecutable(ctx.mpirun, path_var).empty()) {
      std::cerr << "ringpilot: mpirun '" << ctx.mpirun
                << "' not found or not executable (install OpenMPI, or set RINGPILOT_MPIRUN)\n";
      return kExitFailure;
    }
  }

  std::string chosen = args.run_dir;
  if (chosen.empty()) {
    const std::string base = DefaultRunDirName(config.name, std::time(nullptr));
    try {
      chosen = args.dry_run ? UniqueRunDir(base) : ClaimNewRunDir(base);
    } catch (const RunDirError& e) {
      std::cerr << "ringpilot: " << e.what() << "\n";
      return kExitFailure;
    }
  }
  // Absolute, because ranks on other hosts receive it on their command line.
  const RunDirLayout layout(
      std::filesystem::absolute(std::filesystem::path(chosen)).lexically_normal().string());
  ctx.run_dir = layout.root;
  MpirunCommand cmd;
  try {
    cmd = BuildMpirunCommand(config, ctx);
  } catch (const std::invalid_argument& e) {
    std::cerr << args.job_path << ": " << e.what() << "\n";
    return kExitBadInput;
  }
  const std::string launching = "ringpilot: launching: " + ShellQuote(cmd.argv);
  if (args.dry_run) {
    std::cout << launching << "\n";
    return kExitOk;
  }

  std::string resume_note;
  try {
    const PreparedRunDir prepared = PrepareRunDir(layout, EmitJobConfig(config));
    if (prepared.config_changed) {
      resume_note = "; resuming, previous config kept as job.yaml.prev";
    } else if (prepared.resumed) {
      resume_note = "; resuming with the same config";
    }
    if (!cmd.hostfile_path.empty()) WriteFileAtomically(cmd.hostfile_path, cmd.hostfile_content);
  } catch (const RunDirError& e) {
    std::cerr << "ringpilot: " << e.what() << "\n";
    return kExitFailure;
  }

  // Quick doctor of this host (docs/doctor.md): RUN_DIR/doctor.json and doctor.prom.
  if (config.launch.preflight &&
      !RunPreflight(SystemDoctorEnv(), ToDoctorDevice(config.world.device), layout.root, args.force,
                    std::cerr)) {
    return kExitFailure;
  }

  SupervisorOptions options;
  options.max_restarts = config.launch.max_restarts;
  options.run_dir = layout.root;
  options.log_path = layout.launcher_log;
  try {
    Supervisor supervisor(options);
    supervisor.Report("ringpilot: run directory " + layout.root + resume_note);
    supervisor.Report(launching);
    SupervisedCommand command{cmd.argv, env};
    command.env[kMasterAddrVar] = cmd.master_addr;
    command.env[kMasterPortVar] = std::to_string(cmd.master_port);
    return supervisor.Run(command).exit_status;
  } catch (const std::runtime_error& e) {
    std::cerr << e.what() << "\n";
    return kExitFailure;
  }
}

int Exec(const std::vector<std::string>& command) {
  if (command.empty()) {
    std::cerr << "ringpilot exec: no command given (usage: ringpilot exec -- CMD ARGS...)\n";
    return kExitBadInput;
  }
  Environment env;
  try {
    env = ComputeTorchrunEnv(CurrentEnvironment());
  } catch (const RankEnvError& e) {
    std::cerr << e.what() << "\n";
    return kExitBadInput;
  }
  const std::string path = ResolveExecutable(command[0], Lookup(env, "PATH", ""));
  if (path.empty()) {
    std::cerr << "ringpilot exec: " << command[0] << ": command not found\n";
    return kExitNotFound;
  }
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::vector<std::string> env_strings = ToEnvStrings(env);
  std::vector<char*> envp;
  for (const std::string& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  ::execve(path.c_str(), argv.data(), envp.data());
  const int err = errno;
  std::cerr << "ringpilot exec: cannot execute " << path << ": " << std::strerror(err) << "\n";
  return err == ENOENT ? kExitNotFound : kExitCannotRun;
}

int Main(int argc, char** argv) {
  CLI::App app{"ringpilot: launch, supervise and restart data-parallel training jobs", "ringpilot"};
  app.require_subcommand(1, 1);

  std::string validate_job;
  std::vector<std::string> validate_sets;
  bool print = false;
  CLI::App* validate = app.add_subcommand("validate", "Check a job file: exit 0 valid, 2 invalid");
  validate->add_option("JOB", validate_job, "Job file (YAML)")->required();
  AddSetOption(validate, &validate_sets);
  validate->add_flag("--print", print, "Print the resolved job file (every key) to stdout");

  RunArgs run_args;
  CLI::App* run = app.add_subcommand(
      "run", "Launch a job under mpirun and supervise it; exit status is the job's");
  run->add_option("JOB", run_args.job_path, "Job file (YAML)")->required();
  AddSetOption(run, &run_args.sets);
  run->add_option("--run-dir", run_args.run_dir,
                  "Run directory (default runs/<name>-<YYYYmmdd-HHMMSS>); an existing one is "
                  "resumed from its checkpoints");
  run->add_flag("--dry-run", run_args.dry_run, "Print the mpirun command and exit");
  run->add_flag("--force", run_args.force,
                "Start even when the preflight doctor FAILs (launch.preflight: false skips it)");

  CLI::App* exec = app.add_subcommand(
      "exec",
      "Run CMD with the torchrun environment (RANK, WORLD_SIZE, LOCAL_RANK, ...) "
      "derived from mpirun or srun: ringpilot exec -- CMD ARGS...");
  // Everything after `--` is the worker's command line, verbatim (its own options and any
  // further `--` included).
  std::vector<std::string> exec_command;
  exec->add_option("CMD", exec_command, "Command and its arguments, after --");

  // slurm render|submit, k8s render: their handlers run (and exit) from parse callbacks.
  AddSlurmCommand(app);
  AddK8sCommand(app);
  AddTopoCommand(app);
  AddBenchCommand(app);
  AddDoctorCommand(app);
  AddDiagnoseCommand(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // The usual slip with exec is a worker option without `--` before the command.
    const char* hint =
        exec->parsed() ? "usage: ringpilot exec -- CMD ARGS..." : "see 'ringpilot --help'";
    std::cerr << "ringpilot: " << e.what() << " (" << hint << ")\n";
    return kExitBadInput;
  }

  if (*validate) return Validate(validate_job, validate_sets, print);
  if (*run) return Run(run_args);
  return Exec(exec_command);
}

}  // namespace
}  // namespace ringpilot::launcher

int main(int argc, char** argv) { return ringpilot::launcher::Main(argc, argv); }
