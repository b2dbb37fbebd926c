#include "slurm/render.h"

#include <sstream>
#include <stdexcept>

#include "base/exit_status.h"
#include "base/run_variables.h"
#include "base/shell.h"
#include "config/value_rules.h"

namespace ringpilot::slurm {
namespace {

void Require(const std::string& field, const std::string& problem) {
  if (!problem.empty()) throw std::invalid_argument(field + ": " + problem);
}

}  // namespace

std::string RenderSbatch(const config::JobConfig& job, const std::string& self_ringpilot) {
  const config::SlurmConfig& spec = job.slurm;
  const std::string ringpilot = spec.ringpilot.empty() ? self_ringpilot : spec.ringpilot;
  const int nodes = job.world.nodes;
  const int tasks_per_node = job.world.procs_per_node;
  // Per node, not per task: --gpus-per-task gives each task a cgroup with one GPU, and
  // NCCL then cannot see the NVLink peers of its node.
  const int gpus_per_node = config::RequestedGpusPerNode(job.world);
  // The job as the compute nodes run it: inside this allocation, its metrics reachable
  // from the Prometheus host.
  config::JobConfig run_job = job;
  run_job.launch.backend = config::Backend::kSlurm;
  run_job.metrics.bind = config::ClusterMetricsBind(job.metrics.bind);
  const std::string job_yaml = config::EmitJobConfig(run_job);
  Require("name", config::CheckSlurmName(job.name));
  Require("slurm.time", config::CheckSlurmTime(spec.time));
  if (!spec.partition.empty()) Require("slurm.partition", config::CheckSlurmName(spec.partition));
  if (!spec.account.empty()) Require("slurm.account", config::CheckSlurmName(spec.account));
  if (!spec.qos.empty()) Require("slurm.qos", config::CheckSlurmName(spec.qos));
  Require("slurm.run_root", config::CheckSlurmPath(spec.run_root));
  Require("slurm.ringpilot", config::CheckSlurmPath(ringpilot));
  if (nodes < 1) Require("world.nodes", "must be at least 1");
  if (tasks_per_node < 1) Require("world.procs_per_node", "must be at least 1");
  if (spec.signal_seconds < 1 || spec.signal_seconds > 65535) {
    Require("slurm.signal_seconds", "must be in 1..65535");
  }
  for (const std::string& d : spec.directives) {
    Require("slurm.directives", config::CheckSbatchDirective(d));
  }
  for (const std::string& line : spec.setup) {
    Require("slurm.setup", config::CheckSlurmSetupLine(line));
  }
  std::istringstream lines(job_yaml);
  for (std::string line; std::getline(lines, line);) {
    if (line == kJobHeredocDelimiter) {
      Require("job file", std::string("contains the line ") + kJobHeredocDelimiter);
    }
  }

  const std::string& name = job.name;
  std::ostringstream o;
  o << "#!/bin/bash\n";
  o << "#SBATCH --job-name=" << name << "\n";
  o << "#SBATCH --nodes=" << nodes << "\n";
  o << "#SBATCH --ntasks-per-node=" << tasks_per_node << "\n";
  if (gpus_per_node > 0) o << "#SBATCH --gpus-per-node=" << gpus_per_node << "\n";
  if (job.world.device == config::Device::kAuto) {
    o << "# world.device auto: a GPU per rank (world.device cpu requests none)\n";
  }
  o << "#SBATCH --time=" << spec.time << "\n";
  if (!spec.partition.empty()) o << "#SBATCH --partition=" << spec.partition << "\n";
  if (!spec.account.empty()) o << "#SBATCH --account=" << spec.account << "\n";
  if (!spec.qos.empty()) o << "#SBATCH --qos=" << spec.qos << "\n";
  o << "#SBATCH --requeue\n";
  o << "#SBATCH --signal=B:USR1@" << spec.signal_seconds << "\n";
  o << "#SBATCH --output=" << spec.run_root << "/" << name << "-%j.out\n";
  o << "#SBATCH --open-mode=append\n";
  if (!spec.directives.empty()) o << "# slurm.directives:\n";
  for (const std::string& d : spec.directives) o << "#SBATCH " << d << "\n";
  o << "#\n"
       "# Rendered by `ringpilot slurm render`. The run directory is named after the job id,\n"
       "# which a requeued job keeps: after a requeue `ringpilot run` resumes from the\n"
       "# latest checkpoint in it.\n"
       "set -euo pipefail\n"
       "\n"
       ": \"${SLURM_JOB_ID:?not inside a Slurm job (submit this script with sbatch)}\"\n"
       ": \"${SLURM_JOB_NODELIST:?SLURM_JOB_NODELIST is not set}\"\n"
       "\n";
  if (config::RunsCommand(job)) {
    o << "# launch.command: your program runs from the directory sbatch was run in (a relative\n"
         "# path in the command is relative to it). USR1 reaches it through mpirun and\n"
         "# `ringpilot exec`: to be requeued it checkpoints and exits "
      << base::kExitPreempted
      << ", and after the requeue it\n"
         "# resumes from its own checkpoints (in $RINGPILOT_RUN_DIR, the run directory below).\n"
         "cd \"${SLURM_SUBMIT_DIR:-.}\"\n\n";
  }
  o << "ringpilot=" << base::ShellSingleQuote(ringpilot) << "\n";
  o << "run_root=" << base::ShellSingleQuote(spec.run_root) << "\n";
  o << "job_name=" << base::ShellSingleQuote(name) << "\n";
  o << "run_dir=\"${run_root}/${job_name}-${SLURM_JOB_ID}\"\n"
       "mkdir -p \"$run_dir\"\n"
       "job_file=\"${run_dir}/slurm-job.yaml\"\n"
       "\n"
       "# The resolved job file, verbatim (quoted delimiter: no expansion inside).\n";
  o << "cat > \"$job_file\" <<'" << kJobHeredocDelimiter << "'\n";
  o << job_yaml;
  if (!job_yaml.empty() && job_yaml.back() != '\n') o << "\n";
  o << kJobHeredocDelimiter << "\n\n";
  if (!spec.setup.empty()) {
    o << "# slurm.setup, as written; set -u is off while they run (module and environment\n"
         "# scripts read unset variables), set -e stays on: a failing line fails the job.\n"
         "# The files they source are the compute nodes', which shellcheck cannot follow.\n"
         "set +u\n"
         "# shellcheck disable=SC1090,SC1091\n"
         "{\n";
    for (const std::string& line : spec.setup) o << line << "\n";
    o << "}\n"
         "set -u\n\n";
  }
  o << "# Each start of the job (a requeued job starts again with the same id) in the log.\n"
       "echo \"ringpilot: job ${SLURM_JOB_ID} start $(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) on "
       "$(hostname) (restart count ${SLURM_RESTART_COUNT:-0}), run directory ${run_dir}\" >&2\n"
       "\n"
       "# USR1 arrives --signal seconds before the time limit (or from `scancel --signal=USR1\n"
       "# --batch`). It is forwarded to `ringpilot run`, which forwards it through mpirun to\n"
       "# the ranks: they checkpoint at the next step boundary and stop, and `ringpilot run`\n"
       "# exits "
    << base::kExitPreempted
    << ". The job is then requeued: it starts again with the same id, so the\n"
       "# same run directory, and `ringpilot run` resumes from the checkpoint.\n"
       "preempted_status="
    << base::kExitPreempted
    << "\n"
       "# `ringpilot stop RUN_DIR` ends `ringpilot run` with this status: not requeued.\n"
       "stopped_status="
    << base::kExitStopped
    << "\n"
       "pid=\"\"\n"
       "usr1_pending=0\n"
       "# shellcheck disable=SC2317  # called by the USR1 trap\n"
       "on_usr1() {\n"
       "  echo \"ringpilot: USR1 (time limit near or preemption): checkpointing job "
       "${SLURM_JOB_ID} for requeue\" >&2\n"
       "  if [[ -n $pid ]]; then kill -USR1 \"$pid\" 2>/dev/null || true; else usr1_pending=1; fi\n"
       "}\n"
       "trap on_usr1 USR1\n"
       "\n"
       "# backend slurm: `ringpilot run` takes the hosts from this allocation "
       "(SLURM_JOB_NODELIST,\n"
       "# SLURM_TASKS_PER_NODE) and mpirun starts its daemons on them through Slurm.\n"
       "\"$ringpilot\" run \"$job_file\" --run-dir \"$run_dir\" &\n"
       "pid=$!\n"
       "if ((usr1_pending)); then kill -USR1 \"$pid\" 2>/dev/null || true; fi\n"
       "# wait returns early when a trapped signal arrives; wait again until the run ends.\n"
       "status=0\n"
       "while true; do\n"
       "  if wait \"$pid\"; then status=0; else status=$?; fi\n"
       "  kill -0 \"$pid\" 2>/dev/null || break\n"
       "done\n"
       "if ((status == stopped_status)); then\n"
       "  echo \"ringpilot: job ${SLURM_JOB_ID} stopped by 'ringpilot stop' (checkpoint "
       "written); not requeueing\" >&2\n"
       "  exit 0\n"
       "fi\n"
       "if ((status == preempted_status)); then\n"
       "  # `ringpilot stop` asked for this stop (it leaves RUN_DIR/"
    << base::kStopRequestFile
    << "): not a preemption.\n"
       "  if [[ -e \"$run_dir/"
    << base::kStopRequestFile
    << "\" ]]; then\n"
       "    echo \"ringpilot: job ${SLURM_JOB_ID} stopped by 'ringpilot stop' (checkpoint "
       "written); not requeueing\" >&2\n"
       "    exit 0\n"
       "  fi\n"
       "  echo \"ringpilot: job ${SLURM_JOB_ID} checkpointed and stopped; requeueing it\" >&2\n"
       "  scontrol requeue \"$SLURM_JOB_ID\" || exit \"$status\"\n"
       "  exit 0\n"
       "fi\n"
       "exit \"$status\"\n";
  return o.str();
}

}  // namespace ringpilot::slurm
