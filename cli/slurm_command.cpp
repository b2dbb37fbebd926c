#include "cli/slurm_command.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "base/environment.h"
#include "base/exit_status.h"
#include "base/files.h"
#include "base/subprocess.h"
#include "config/job.h"
#include "slurm/render.h"

namespace ringpilot::cli {
namespace {

struct SlurmArgs {
  std::string job_path;
  std::vector<std::string> sets;
};

std::string SelfExecutable() {
  const std::string self = base::SelfExecutablePath();
  return self.empty() ? std::string("ringpilot") : self;
}

// The script, or "" after printing the problem; `config` receives the job.
std::string RenderScript(const SlurmArgs& args, config::JobConfig* config) {
  try {
    // Backend slurm whatever the file says: `slurm render` is how the job runs.
    *config = config::LoadJobConfigFor(config::Backend::kSlurm, args.job_path, args.sets);
    return slurm::RenderSbatch(*config, SelfExecutable());
  } catch (const config::ConfigError& e) {
    std::cerr << e.what() << "\n";
  } catch (const std::invalid_argument& e) {
    std::cerr << args.job_path << ": " << e.what() << "\n";
  }
  return "";
}

int Render(const SlurmArgs& args) {
  config::JobConfig config;
  const std::string script = RenderScript(args, &config);
  if (script.empty()) return base::kExitUsage;
  std::cout << script;
  return 0;
}

// Writes RUN_ROOT/<name>.sbatch (RUN_ROOT must exist for sbatch's --output) and runs
// `sbatch` on it; stdout and stderr pass through.
int Submit(const SlurmArgs& args) {
  config::JobConfig config;
  const std::string script = RenderScript(args, &config);
  if (script.empty()) return base::kExitUsage;
  const std::string path = config.slurm.run_root + "/" + config.name + ".sbatch";
  try {
    base::MakeDirs(config.slurm.run_root);
    base::WriteFileAtomically(path, script);
  } catch (const std::exception& e) {
    std::cerr << "ringpilot slurm submit: " << e.what() << "\n";
    return base::kExitFailure;
  }
  std::cout.flush();
  base::SpawnOptions sbatch;
  sbatch.argv = {"sbatch", path};
  base::RunResult run;
  try {
    run = base::RunToEnd(sbatch);
  } catch (const base::SpawnError& e) {
    std::cerr << "ringpilot slurm submit: " << e.what() << "\n";
    return base::kExitFailure;
  }
  if (run.exec_errno != 0) {
    std::cerr << "ringpilot slurm submit: cannot run sbatch: " << std::strerror(run.exec_errno)
              << " (is Slurm installed and on PATH?)\n";
    return base::kExitFailure;
  }
  if (run.status.term_signal == 0) return run.status.exit_code;
  std::cerr << "ringpilot slurm submit: sbatch killed by signal " << run.status.term_signal << "\n";
  return base::kExitFailure;
}

void AddJobArgs(CLI::App* cmd, SlurmArgs* args) {
  cmd->add_option("JOB", args->job_path, "Job file (YAML)")->required();
  cmd->add_option("--set", args->sets, "Override a job key, e.g. --set slurm.partition=gpu")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("KEY=VALUE");
}

}  // namespace

void AddSlurmCommand(CLI::App& app) {
  auto render_args = std::make_shared<SlurmArgs>();
  auto submit_args = std::make_shared<SlurmArgs>();
  CLI::App* slurm_cmd = app.add_subcommand("slurm", "Slurm: render or submit an sbatch script");
  slurm_cmd->require_subcommand(1, 1);
  CLI::App* render = slurm_cmd->add_subcommand("render", "Print the sbatch script for a job");
  AddJobArgs(render, render_args.get());
  render->callback([render_args] {
    const int status = Render(*render_args);
    std::cout.flush();
    std::exit(status);
  });
  CLI::App* submit =
      slurm_cmd->add_subcommand("submit", "Write RUN_ROOT/<name>.sbatch and submit it with sbatch");
  AddJobArgs(submit, submit_args.get());
  submit->callback([submit_args] {
    const int status = Submit(*submit_args);
    std::cout.flush();
    std::exit(status);
  });
}

}  // namespace ringpilot::cli
