#include "cli/run_command.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "base/environment.h"
#include "base/exit_status.h"
#include "base/files.h"
#include "base/run_variables.h"
#include "base/shell.h"
#include "base/time.h"
#include "config/device_plan.h"
#include "config/job.h"
#include "doctor/command.h"
#include "history/attempts.h"
#include "history/run_lock.h"
#include "history/run_summary.h"
#include "launcher/failure_report.h"
#include "launcher/mpirun_command.h"
#include "launcher/run_dir.h"
#include "launcher/supervisor.h"
#include "metrics/free_ports.h"
#include "metrics/scrape_targets.h"
#include "mpirun/cma_probe.h"

namespace ringpilot::cli {
namespace {

constexpr const char* kTrainerName = "ringpilot-trainer";
// Hosts named in the metrics line before it says "and N more".
constexpr std::size_t kMetricsHostsShown = 2;

// The first word of each `host slots=K` line of a hostfile.
std::vector<std::string> HostfileHosts(const std::string& content) {
  std::vector<std::string> hosts;
  std::istringstream in(content);
  for (std::string line; std::getline(in, line);) {
    const std::string host = line.substr(0, line.find(' '));
    if (!host.empty()) hosts.push_back(host);
  }
  return hosts;
}

// Where Prometheus finds the ranks: HOST:FIRST-LAST per node (the same local-rank ports on
// every node). `chosen_base`: the block `ringpilot run` found free on this host (backend
// local), else 0: each node's ranks take the first free block at or above port_base.
std::string MetricsLine(const config::JobConfig& c, const std::vector<std::string>& hosts,
                        int chosen_base) {
  const bool program = config::RunsCommand(c);
  if (!c.metrics.enabled) return "off (metrics.enabled false)";
  // A program's rank serves twice: `ringpilot exec` its process (CPU, memory, restarts)
  // from the start, and the NCCL profiler plugin, which NCCL loads, the NCCL series on the
  // next free block: a program on gloo or the CPU has the first only.
  const std::string targets =
      program ? "RUN_DIR/prometheus-targets-rank-N*.json list what each rank serves"
              : "RUN_DIR/" + std::string(base::kScrapeTargetsFile) + " lists them";
  const std::string what =
      program ? "of each rank's program process (CPU, memory, restarts; ringpilot exec) and, "
                "once the program starts NCCL, its NCCL series on the next free ports, "
              : "";
  if (c.metrics.port_base == 0) {
    return what + "on ports each rank picks (metrics.port_base 0; " + targets + ")";
  }
  std::string line;
  const int base_port = chosen_base > 0 ? chosen_base : c.metrics.port_base;
  const int first = base::MetricsPort(base_port, 0);
  const int last = base::MetricsPort(base_port, c.world.procs_per_node - 1);
  for (std::size_t node = 0; node < hosts.size() && node < kMetricsHostsShown; ++node) {
    line += (line.empty() ? "" : ", ") + hosts[node] + ":" + std::to_string(first) +
            (last != first ? "-" + std::to_string(last) : "");
  }
  if (hosts.size() > kMetricsHostsShown) {
    line += ", and " + std::to_string(hosts.size() - kMetricsHostsShown) + " more node(s)";
  }
  std::string how;
  if (chosen_base > 0 && chosen_base != c.metrics.port_base) {
    how = "; " + std::to_string(c.metrics.port_base) + "-" + std::to_string(chosen_base - 1) +
          " are taken on this host (another job?)";
  } else if (chosen_base == 0) {
    how = "; a node whose ports are taken moves its ranks up a block of " +
          std::to_string(c.world.procs_per_node);
  }
  return what + "on " + line + " (a port per local rank, path /metrics" + how + "; " + targets +
         "; docs/metrics.md)";
}

// world.device resolved on this host, where backend local runs every rank: nullopt for
// other backends (each rank plans on its own node and rank 0 logs the notice). Throws
// config::ConfigError when the job cannot run here (world.device cuda, no GPU).
std::optional<config::DevicePlan> PlanDeviceHere(const config::JobConfig& c) {
  if (c.launch.backend != config::Backend::kLocal) return std::nullopt;
  bool gpu_visible = false;
  if (c.world.device != config::Device::kCpu) {
    // libcuda's device count after CUDA_VISIBLE_DEVICES: what the ranks will see.
    gpu_visible = doctor::SystemDoctorEnv().query_driver().cuda_device_count > 0;
  }
  return config::PlanDevice(c, gpu_visible, base::HostName());
}

}  // namespace

std::vector<std::string> StartupLines(const config::JobConfig& c, const std::string& run_dir,
                                      const std::vector<std::string>& hosts,
                                      const std::string& this_host, int chosen_port_base) {
  std::vector<std::string> node_hosts = hosts;
  if (node_hosts.empty()) {
    // Backend local: the ranks serve on this host, at the address they resolve `bind` to
    // (auto: 127.0.0.1, or the node's address inside a Slurm allocation or a pod).
    const std::string address = metrics::ResolveBind(c.metrics.bind, base::CurrentEnvironment());
    node_hosts.push_back(address == "0.0.0.0" ? this_host : address);
  }
  const bool program = config::RunsCommand(c);
  const std::string ranks =
      std::to_string(c.world.size()) + " rank(s) (" + std::to_string(c.world.nodes) +
      " node(s) x " + std::to_string(c.world.procs_per_node) + ", device " +
      config::ToString(c.world.device) + ", backend " + config::ToString(c.launch.backend) + ")";
  std::vector<std::string> lines;
  if (program) {
    // A program's data and steps are its own business.
    lines.push_back("ringpilot: job " + c.name + ": " + base::ShellJoin(c.launch.command) + ", " +
                    ranks);
  } else {
    const std::string steps = c.train.epochs > 0 ? std::to_string(c.train.epochs) + " epoch(s)"
                                                 : std::to_string(c.train.steps) + " steps";
    std::string data = config::ToString(c.data.kind);
    if (!c.data.train.empty()) data += " " + c.data.train;
    data += ", batch " + std::to_string(c.data.batch_per_rank) + " per rank";
    lines.push_back("ringpilot: job " + c.name + ": " + config::ToString(c.model.name) + ", " +
                    ranks + ", " + steps);
    lines.push_back("ringpilot: data " + data);
  }
  lines.push_back("ringpilot: run directory " + run_dir + " (ringpilot status|logs|stop " +
                  run_dir + ")");
  lines.push_back("ringpilot: metrics " + MetricsLine(c, node_hosts, chosen_port_base));
  return lines;
}

std::string TrainerPath(const base::Environment& env) {
  const std::string self_dir = base::DirName(base::SelfExecutablePath());
  std::string trainer = base::Lookup(env, "RINGPILOT_TRAINER", self_dir + "/" + kTrainerName);
  // A relative path would be resolved against each rank's working directory; a bare name
  // is left for mpirun to find on PATH.
  if (trainer.find('/') != std::string::npos) {
    trainer = std::filesystem::absolute(trainer).lexically_normal().string();
  }
  return trainer;
}

// `--set KEY=VALUE`, repeatable, one value per flag so that a job file after it stays
// the positional argument.
void AddSetOption(CLI::App* cmd, std::vector<std::string>* sets) {
  cmd->add_option("--set", *sets, "Override a job key, e.g. --set train.steps=20 (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("KEY=VALUE");
}

int RunValidate(const std::string& job_path, const std::vector<std::string>& sets, bool print) {
  // Every problem of the file, one line each (config::ConfigError).
  config::JobConfig config;
  try {
    config = config::LoadJobConfig(job_path, sets);
  } catch (const config::ConfigError& e) {
    std::cerr << e.what() << "\n";
    return base::kExitUsage;
  }
  std::optional<config::DevicePlan> plan;
  try {
    plan = PlanDeviceHere(config);
  } catch (const config::ConfigError& e) {
    // A valid file this host cannot run: what `run` would end with, before starting.
    std::cerr << e.what() << "\n";
    return base::kExitPermanent;
  }
  if (plan && !plan->notice.empty()) std::cerr << job_path << ": " << plan->notice << "\n";
  const std::string what = config::RunsCommand(config)
                               ? "command " + base::ShellJoin(config.launch.command)
                               : std::string("model ") + config::ToString(config.model.name);
  const std::string verdict = job_path + ": valid (" + config.name + ", world size " +
                              std::to_string(config.world.size()) + ", " + what + ")";
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

  std::optional<config::DevicePlan> plan;
  if (!args.dry_run) {
    try {
      plan = PlanDeviceHere(config);
    } catch (const config::ConfigError& e) {
      // No attempt could succeed: the permanent-failure status, and nothing started.
      std::cerr << e.what() << "\n";
      return base::kExitPermanent;
    }
  }

  const base::Environment env = base::CurrentEnvironment();
  launcher::MpirunContext ctx;
  ctx.mpirun = base::Lookup(env, "RINGPILOT_MPIRUN", "mpirun");
  ctx.trainer = TrainerPath(env);
  ctx.ringpilot = base::SelfExecutablePath();
  if (ctx.ringpilot.empty()) ctx.ringpilot = "ringpilot";
  ctx.euid = static_cast<unsigned>(::geteuid());
  ctx.env = env;
  if (backend == config::Backend::kLocal) ctx.cma_works = mpirun::CrossMemoryAttachWorks();
  // A dry run only shows the command, so it works on a machine without the binaries.
  const bool runs_command = config::RunsCommand(config);
  if (!args.dry_run) {
    const std::string path_var = base::Lookup(env, "PATH", "");
    const std::string program = config.launch.command.empty() ? "" : config.launch.command[0];
    // On this host a missing program is known now; other hosts' are their own.
    if (runs_command && backend == config::Backend::kLocal &&
        base::ResolveExecutable(program, path_var).empty()) {
      std::cerr << args.job_path << ": launch.command: '" << program
                << "' not found or not executable"
                << (program.find('/') == std::string::npos ? " on PATH" : "") << "\n";
      return base::kExitUsage;
    }
    if (!runs_command && base::ResolveExecutable(ctx.trainer, path_var).empty()) {
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
  // On one host the metrics ports can be checked now: the first free block at or above
  // port_base (a second job on the host moves up); the ranks start there and step over a
  // port taken later themselves. The job file keeps port_base as written.
  int chosen_port_base = 0;
  config::JobConfig launched = config;
  if (backend == config::Backend::kLocal && config.metrics.enabled &&
      config.metrics.port_base != 0) {
    const std::string address = metrics::ResolveBind(config.metrics.bind, env);
    chosen_port_base = metrics::FirstFreePortBlock(
        address, config.metrics.port_base, config.world.procs_per_node, base::kMetricsPortBlocks);
    if (chosen_port_base > 0) launched.metrics.port_base = chosen_port_base;
  }
  launcher::MpirunCommand cmd;
  try {
    cmd = launcher::BuildMpirunCommand(launched, ctx);
  } catch (const std::invalid_argument& e) {
    std::cerr << args.job_path << ": " << e.what() << "\n";
    return base::kExitUsage;
  }
  const std::string launching = "ringpilot: launching: " + base::ShellJoin(cmd.argv);
  const std::vector<std::string> hosts = HostfileHosts(cmd.hostfile_content);
  const std::vector<std::string> startup =
      StartupLines(config, layout.root, hosts, base::HostName(), chosen_port_base);
  if (args.dry_run) {
    // What an attempt would run, as one shell command line (the variables the supervisor
    // sets first), and nothing else on stdout.
    for (const std::string& line : startup) std::cerr << line << "\n";
    const auto assign = [](const std::string& name, const std::string& value) {
      return name + "=" + base::ShellJoin({value}) + " ";
    };
    std::string line = assign(base::kRunDirVar, layout.root) + assign(base::kRestartVar, "0") +
                       assign(base::kAttemptVar, "1") +
                       assign(base::kMaxRestartsVar, std::to_string(config.launch.max_restarts)) +
                       assign(base::kMasterAddrVar, cmd.master_addr) +
                       assign(base::kMasterPortVar, std::to_string(cmd.master_port)) +
                       assign(base::kVerboseVar, args.verbose ? "1" : "0");
    if (chosen_port_base > 0 && chosen_port_base != config.metrics.port_base && !runs_command) {
      line += assign(base::kMetricsPortFromVar, std::to_string(chosen_port_base));
    }
    for (const auto& [name, value] : cmd.env) line += assign(name, value);
    std::cout << line << base::ShellJoin(cmd.argv) << "\n";
    return base::kExitOk;
  }

  // One launcher per run directory, for as long as this one lives: a second one stops
  // here, before it reads or writes anything else in the directory (history/run_lock.h).
  std::unique_ptr<history::RunDirLock> lock;
  std::string lock_notice;
  try {
    base::MakeDirs(layout.root);
    lock = history::RunDirLock::Acquire(layout.root, &lock_notice);
  } catch (const history::RunDirBusy& e) {
    std::cerr << "ringpilot: " << e.what() << "\n";
    return base::kExitFailure;
  } catch (const base::FileError& e) {
    std::cerr << "ringpilot: " << e.what() << "\n";
    return base::kExitFailure;
  }
  if (!lock_notice.empty()) std::cerr << "ringpilot: " << lock_notice << "\n";

  // A finished run's results are history: running it again with nothing left to train
  // would only overwrite them. Training on (more steps or epochs) keeps the old summary.
  // summary.json is the trainer's; a program's progress is its own (its checkpoints). One
  // that is absent or cannot be read is no finished run.
  const std::optional<history::RunSummary> finished =
      runs_command ? std::nullopt : history::ReadRunSummaryIfValid(layout.summary_json);
  if (finished && (config.train.epochs > 0 ? finished->epochs >= config.train.epochs
                                           : finished->steps >= config.train.steps)) {
    const std::string done = config.train.epochs > 0 ? std::to_string(finished->epochs) + " epochs"
                                                     : std::to_string(finished->steps) + " steps";
    std::cerr << "ringpilot: " << layout.root << " already finished " << done << " ("
              << history::kRunSummaryFile << "); raise "
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
    if (finished && launcher::KeepPrevious(layout.summary_json)) {
      resume_note +=
          "; the finished run's summary kept as " + history::PrevPath(history::kRunSummaryFile);
    }
    // This run numbers its attempts from 1 again: the earlier ones' records stay whole.
    if (launcher::KeepPreviousAttempts(layout)) {
      resume_note += "; earlier attempts' records kept in attempts.prev";
    }
    if (!cmd.hostfile_path.empty())
      base::WriteFileAtomically(cmd.hostfile_path, cmd.hostfile_content);
  } catch (const base::FileError& e) {
    std::cerr << "ringpilot: " << e.what() << "\n";
    return base::kExitFailure;
  }

  launcher::SupervisorOptions options;
  options.max_restarts = config.launch.max_restarts;
  // A launch.command rank's start is its wrapper's first beat (logs/rank-N.program.json).
  options.start_timeout_s = config.launch.start_timeout_s;
  options.abort_grace_s = config.launch.abort_grace_s;
  options.run_dir = layout.root;
  options.log_path = layout.launcher_log;
  const std::string logs = layout.logs;
  const double timeout_s = config.comm.timeout_s;
  if (runs_command && config.metrics.enabled) {
    // The program's ranks report their NCCL progress (logs/rank-N.nccl.json): a collective
    // that waits longer than comm.timeout_s is a hang, stopped and restarted like a crash.
    options.hang_check = [logs, timeout_s](double attempt_start_unix) {
      return launcher::NcclHangReason(logs, attempt_start_unix - 1.0, timeout_s, base::UnixNow());
    };
  } else if (!runs_command) {
    // A trainer rank whose heartbeat stops for comm.timeout_s is stopped or frozen: the
    // hang a collective timeout never reports when the rank is alone, or before its peers
    // wait for it (a rank that gives up after a timeout writes an "abort" beat first).
    options.hang_check = [logs, timeout_s](double attempt_start_unix) {
      return launcher::SilentRankReason(logs, attempt_start_unix - 1.0, timeout_s, base::UnixNow());
    };
  }
  try {
    launcher::Supervisor supervisor(options);
    for (const std::string& line : startup) supervisor.Report(line);
    if (!lock_notice.empty()) supervisor.Note("ringpilot: " + lock_notice);
    if (plan && !plan->notice.empty()) supervisor.Report("ringpilot: " + plan->notice);
    if (!resume_note.empty()) supervisor.Report("ringpilot: " + resume_note.substr(2));
    // Quick doctor of this host (docs/doctor.md): RUN_DIR/doctor.json and doctor.prom.
    doctor::DoctorEnv doctor_env = doctor::SystemDoctorEnv();
    doctor_env.program = runs_command;
    if (config.launch.preflight && !doctor::RunPreflight(doctor_env, config.world.device,
                                                         layout.root, args.force, std::cerr)) {
      return base::kExitFailure;
    }
    if (args.verbose) {
      supervisor.Report(launching);
    } else {
      supervisor.Note(launching);
    }
    launcher::SupervisedCommand command{cmd.argv, env};
    for (const auto& [name, value] : cmd.env) command.env[name] = value;
    command.env[base::kMasterAddrVar] = cmd.master_addr;
    command.env[base::kMasterPortVar] = std::to_string(cmd.master_port);
    command.env[base::kVerboseVar] = args.verbose ? "1" : "0";
    // The trainer's ranks (on this host) start at the block found free; a program's get it
    // as RINGPILOT_METRICS_PORT_BASE (cmd.env).
    if (chosen_port_base > 0 && chosen_port_base != config.metrics.port_base && !runs_command) {
      command.env[base::kMetricsPortFromVar] = std::to_string(chosen_port_base);
    } else {
      command.env.erase(base::kMetricsPortFromVar);
    }
    return supervisor.Run(command).exit_status;
  } catch (const std::runtime_error& e) {
    std::cerr << e.what() << "\n";
    return base::kExitFailure;
  }
}

}  // namespace ringpilot::cli
