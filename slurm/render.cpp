#include "slurm/render.h"

#include <cctype>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace ringpilot::slurm {
namespace {

bool AllDigits(const std::string& s, size_t min_len, size_t max_len) {
  if (s.size() < min_len || s.size() > max_len) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::vector<std::string> SplitColons(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(':', start);
    parts.push_back(s.substr(start, pos == std::string::npos ? pos : pos - start));
    if (pos == std::string::npos) return parts;
    start = pos + 1;
  }
}

void Require(const std::string& field, const std::string& problem) {
  if (!problem.empty()) throw std::invalid_argument(field + ": " + problem);
}

}  // namespace

std::string CheckTime(const std::string& s) {
  const std::string problem =
      "must be MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED, got '" + s + "'";
  if (s == "UNLIMITED") return "";
  std::string rest = s;
  bool has_days = false;
  const size_t dash = s.find('-');
  if (dash != std::string::npos) {
    if (!AllDigits(s.substr(0, dash), 1, 4)) return problem;
    has_days = true;
    rest = s.substr(dash + 1);
  }
  const std::vector<std::string> parts = SplitColons(rest);
  if (parts.size() > 3) return problem;
  for (const auto& p : parts) {
    if (!AllDigits(p, 1, has_days || parts.size() > 1 ? 2 : 7)) return problem;
  }
  bool positive = has_days && std::stoi(s.substr(0, dash)) > 0;
  for (const auto& p : parts) positive = positive || std::stoi(p) > 0;
  if (!positive) return "must be longer than zero, got '" + s + "'";
  return "";
}

std::string CheckName(const std::string& s) {
  bool ok = !s.empty() && s.size() <= 63;
  for (char c : s) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  }
  return ok ? "" : "must be 1 to 63 of [A-Za-z0-9._-], got '" + s + "'";
}

std::string CheckPath(const std::string& s) {
  bool ok = !s.empty() && s.size() <= 1024 && s.front() != '-';
  for (char c : s) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) ||
                std::string("._/+-").find(c) != std::string::npos);
  }
  return ok ? "" : "must be a path of [A-Za-z0-9._/+-] not starting with '-', got '" + s + "'";
}

std::string ShellSingleQuote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string RenderSbatch(const SbatchSpec& spec) {
  Require("name", CheckName(spec.job_name));
  Require("slurm.time", CheckTime(spec.time));
  if (!spec.partition.empty()) Require("slurm.partition", CheckName(spec.partition));
  if (!spec.account.empty()) Require("slurm.account", CheckName(spec.account));
  if (!spec.qos.empty()) Require("slurm.qos", CheckName(spec.qos));
  Require("slurm.run_root", CheckPath(spec.run_root));
  Require("slurm.ringpilot", CheckPath(spec.ringpilot));
  if (spec.nodes < 1) Require("world.nodes", "must be at least 1");
  if (spec.tasks_per_node < 1) Require("world.procs_per_node", "must be at least 1");
  if (spec.gpus_per_node < 0) Require("gpus per node", "must not be negative");
  if (spec.signal_seconds < 1 || spec.signal_seconds > 65535) {
    Require("slurm.signal_seconds", "must be in 1..65535");
  }
  std::istringstream lines(spec.job_yaml);
  for (std::string line; std::getline(lines, line);) {
    if (line == kJobHeredocDelimiter) {
      Require("job file", std::string("contains the line ") + kJobHeredocDelimiter);
    }
  }

  const std::string name = spec.job_name;
  std::ostringstream o;
  o << "#!/bin/bash\n";
  o << "#SBATCH --job-name=" << name << "\n";
  o << "#SBATCH --nodes=" << spec.nodes << "\n";
  o << "#SBATCH --ntasks-per-node=" << spec.tasks_per_node << "\n";
  // Per node, not per task: --gpus-per-task gives each task a cgroup with one GPU, and
  // NCCL then cannot see the NVLink peers of its node.
  if (spec.gpus_per_node > 0) o << "#SBATCH --gpus-per-node=" << spec.gpus_per_node << "\n";
  o << "#SBATCH --time=" << spec.time << "\n";
  if (!spec.partition.empty()) o << "#SBATCH --partition=" << spec.partition << "\n";
  if (!spec.account.empty()) o << "#SBATCH --account=" << spec.account << "\n";
  if (!spec.qos.empty()) o << "#SBATCH --qos=" << spec.qos << "\n";
  o << "#SBATCH --requeue\n";
  o << "#SBATCH --signal=B:USR1@" << spec.signal_seconds << "\n";
  o << "#SBATCH --output=" << spec.run_root << "/" << name << "-%j.out\n";
  o << "#SBATCH --open-mode=append\n";
  o << "#\n"
       "# Rendered by `ringpilot slurm render`. The run directory is named after the job id,\n"
       "# which a requeued job keeps: after a requeue `ringpilot run` resumes from the\n"
       "# latest checkpoint in it.\n"
       "set -euo pipefail\n"
       "\n"
       ": \"${SLURM_JOB_ID:?not inside a Slurm job (submit this script with sbatch)}\"\n"
       ": \"${SLURM_JOB_NODELIST:?SLURM_JOB_NODELIST is not set}\"\n"
       "\n";
  o << "ringpilot=" << ShellSingleQuote(spec.ringpilot) << "\n";
  o << "run_root=" << ShellSingleQuote(spec.run_root) << "\n";
  o << "job_name=" << ShellSingleQuote(name) << "\n";
  o << "run_dir=\"${run_root}/${job_name}-${SLURM_JOB_ID}\"\n"
       "mkdir -p \"$run_dir\"\n"
       "job_file=\"${run_dir}/slurm-job.yaml\"\n"
       "\n"
       "# The resolved job file, verbatim (quoted delimiter: no expansion inside).\n";
  o << "cat > \"$job_file\" <<'" << kJobHeredocDelimiter << "'\n";
  o << spec.job_yaml;
  if (!spec.job_yaml.empty() && spec.job_yaml.back() != '\n') o << "\n";
  o << kJobHeredocDelimiter << "\n\n";
  o << "# Each start of the job (a requeued job starts again with the same id) in the log.\n"
       "echo \"ringpilot: job ${SLURM_JOB_ID} start $(date -u +%Y-%m-%dT%H:%M:%SZ) on "
       "$(hostname) (restart count ${SLURM_RESTART_COUNT:-0}), run directory ${run_dir}\" >&2\n"
       "\n"
       "# USR1 arrives --signal seconds before the time limit (or from `scancel --signal=USR1\n"
       "# --batch`). It is forwarded to `ringpilot run`, which forwards it through mpirun to\n"
       "# the ranks: they checkpoint at the next step boundary and stop, and `ringpilot run`\n"
       "# exits "
    << kRunPreemptedStatus
    << ". The job is then requeued: it starts again with the same id, so the\n"
       "# same run directory, and `ringpilot run` resumes from the checkpoint.\n"
       "preempted_status="
    << kRunPreemptedStatus
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
       "\"$ringpilot\" run \"$job_file\" --run-dir \"$run_dir\" --set launch.backend=slurm &\n"
       "pid=$!\n"
       "if ((usr1_pending)); then kill -USR1 \"$pid\" 2>/dev/null || true; fi\n"
       "# wait returns early when a trapped signal arrives; wait again until the run ends.\n"
       "status=0\n"
       "while true; do\n"
       "  if wait \"$pid\"; then status=0; else status=$?; fi\n"
       "  kill -0 \"$pid\" 2>/dev/null || break\n"
       "done\n"
       "if ((status == preempted_status)); then\n"
       "  echo \"ringpilot: job ${SLURM_JOB_ID} checkpointed and stopped; requeueing it\" >&2\n"
       "  scontrol requeue \"$SLURM_JOB_ID\" || exit \"$status\"\n"
       "  exit 0\n"
       "fi\n"
       "exit \"$status\"\n";
  return o.str();
}

}  // namespace ringpilot::slurm
