// `ringpilot`: the front end. Parses the command line and hands each subcommand to its
// room: validate/run (cli/run_command.h), status/logs/stop (cli/run_dir_commands.h), exec,
// export, slurm, k8s, topo, data pack|tokenize, bench comm, doctor, diagnose; --version
// (cli/version_command.h).
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/exit_status.h"
#include "cli/data_command.h"
#include "cli/data_tokenize_command.h"
#include "cli/exec_command.h"
#include "cli/export_command.h"
#include "cli/k8s_command.h"
#include "cli/run_command.h"
#include "cli/run_dir_commands.h"
#include "cli/slurm_command.h"
#include "cli/topo_command.h"
#include "cli/version_command.h"
#include "commbench/command.h"
#include "diagnose/command.h"
#include "doctor/command.h"

namespace ringpilot::cli {
namespace {

int Main(int argc, char** argv) {
  CLI::App app{"ringpilot: launch, supervise and restart data-parallel training jobs", "ringpilot"};
  app.require_subcommand(1, 1);
  app.add_flag_callback(
      "--version",
      [] {
        std::cout << VersionText(base::CurrentEnvironment()) << std::flush;
        throw CLI::Success();
      },
      "Print ringpilot's version and git commit, and the library versions a run uses");

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
  run->add_flag("--dry-run", run_args.dry_run,
                "Print the command an attempt would run (its variables, mpirun and the "
                "trainer) and exit");
  run->add_flag("-v,--verbose", run_args.verbose,
                "Also show the mpirun command and rank 0's start-up detail (cluster view, "
                "placement plan; always in logs/)");
  run->add_flag("--force", run_args.force,
                "Start even when the preflight doctor FAILs (launch.preflight: false skips it)");

  CLI::App* exec = app.add_subcommand(
      "exec",
      "Run CMD with the torchrun environment (RANK, WORLD_SIZE, LOCAL_RANK, ...) "
      "derived from mpirun or srun: ringpilot exec -- CMD ARGS...");
  // Everything after `--` is the worker's command line, verbatim (its own options and any
  // further `--` included).
  ExecArgs exec_args;
  bool no_nccl_metrics = false;
  exec->add_flag("--no-nccl-metrics", no_nccl_metrics,
                 "Do not load the NCCL profiler plugin (NCCL_PROFILER_PLUGIN, per-rank NCCL "
                 "metrics on metrics.port_base + LOCAL_RANK)");
  exec->add_option("--log-dir", exec_args.log_dir,
                   "Run CMD as a child: its output also goes to DIR/rank-RANK.log, which ends "
                   "with a FATAL line when it fails (how `ringpilot run` starts a "
                   "launch.command job)")
      ->type_name("DIR");
  exec->add_option("--bind", exec_args.bind,
                   "Place the rank first as the trainer does (GPU order, NCCL's NIC, CPU "
                   "binding): auto, numa, cores or none (plan without binding)")
      ->type_name("POLICY");
  exec->add_option("--device", exec_args.device,
                   "With --bind: auto (CUDA when the node has a GPU), cuda or cpu")
      ->type_name("DEVICE");
  exec->add_option("CMD", exec_args.command, "Command and its arguments, after --");

  // slurm render|submit, k8s render: their handlers run (and exit) from parse callbacks.
  AddRunDirCommands(app);
  AddSlurmCommand(app);
  AddK8sCommand(app);
  AddTopoCommand(app);
  CLI::App* data = AddDataCommand(app);
  AddPackCommand(*data);
  AddTokenizeCommand(*data);
  AddExportCommand(app);
  commbench::AddBenchCommand(app);
  doctor::AddDoctorCommand(app);
  diagnose::AddDiagnoseCommand(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // The usual slip with exec is a worker option without `--` before the command.
    const char* hint =
        exec->parsed() ? "usage: ringpilot exec -- CMD ARGS..." : "see 'ringpilot --help'";
    std::cerr << "ringpilot: " << e.what() << " (" << hint << ")\n";
    return base::kExitUsage;
  }

  if (*validate) return RunValidate(validate_job, validate_sets, print);
  if (*run) return RunJob(run_args);
  exec_args.nccl_metrics = !no_nccl_metrics;
  return RunExec(exec_args);
}

}  // namespace
}  // namespace ringpilot::cli

int main(int argc, char** argv) { return ringpilot::cli::Main(argc, argv); }
