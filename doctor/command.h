// `ringpilot doctor [--json] [--device cpu|cuda|auto] [--prometheus FILE]
// [--hosts H1:S,H2:S | --job JOB.yaml]`: preflight checks of this node, or of every node of a
// host list through `mpirun -npernode 1` (doctor/doctor.h, docs/doctor.md); exit 1 when any
// check FAILs, else 0; 2 for bad input. Also the quick preflight `ringpilot run` runs.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "config/job.h"
#include "doctor/doctor.h"

namespace ringpilot::doctor {

struct DoctorArgs {
  bool json = false;
  std::string device = "auto";  ///< cpu | cuda | auto (CLI11 checks the choice)
  std::string prometheus;       ///< --prometheus / --metrics-file: textfile collector output
  std::string hosts;            ///< --hosts "h1:2,h2:2": every node through mpirun
  std::string job;              ///< --job JOB.yaml: the job's launch.hosts and mpirun_args
  bool node_report = false;     ///< hidden: one JSON line {host, facts, checks} (per node);
                                ///< exits 0 once printed (the report carries the verdict)
};

/// Adds the `doctor` subcommand to `app`. Like `topo`, its handler runs as a parse callback
/// and ends the process with RunDoctorCommand's exit status.
void AddDoctorCommand(CLI::App& app);

/// Runs every check against ENV and prints the table or the JSON document (and writes the
/// Prometheus file when asked): 1 if any FAILed, 2 when the file cannot be written.
int RunDoctorCommand(const DoctorArgs& args, const DoctorEnv& env, std::ostream& out);

/// `ringpilot run`'s preflight: the quick checks (DoctorEnv::quick) of this host for DEV,
/// RUN_DIR/doctor.json and RUN_DIR/doctor.prom written, each WARN and FAIL printed to ERR as
/// one line. True when the job may start: no FAIL, or FORCE (then the FAILs are printed as
/// overridden).
bool RunPreflight(DoctorEnv env, config::Device dev, const std::string& run_dir, bool force,
                  std::ostream& err);

/// `--device`: "cpu" | "cuda" | anything else is auto (CLI11 checks the choices).
config::Device ParseDeviceOption(const std::string& name);

// ---- across nodes (doctor_nodes.cpp) -------------------------------------------------------

/// What one node reports with --node-report: its host name, facts compared across nodes, and
/// its checks.
struct NodeReport {
  std::string host;
  nlohmann::ordered_json facts;  ///< NodeFacts()
  std::vector<CheckResult> checks;
};

/// Facts compared across nodes: driver, cuda_driver, cuda_runtime, gpu_count, gpu_models,
/// nccl, torch, mpi, nic_rates (strings or numbers; "" / -1 where unknown).
nlohmann::ordered_json NodeFacts(const DoctorEnv& env, const DriverInfo& drv);

/// "h1:2,h2" -> {h1, 2}, {h2, 1}. Throws std::invalid_argument on an empty or bad entry.
std::vector<config::HostSlots> ParseHostList(const std::string& text);

/// The mpirun command that runs `SELF doctor --node-report --device DEVICE` once on each host:
/// `MPIRUN -np N --hostfile HOSTFILE -npernode 1 --tag-output --bind-to none
/// [--allow-run-as-root] --mca btl_vader_single_copy_mechanism none` + `-x` for each forwarded
/// variable set in ENV (IsForwardedVariable) + MPIRUN_ARGS + the doctor command.
std::vector<std::string> DoctorMpirunArgv(const std::string& mpirun, std::size_t hosts,
                                          const std::string& hostfile,
                                          const std::vector<std::string>& mpirun_args,
                                          const std::string& self, const std::string& device,
                                          unsigned euid, const base::Environment& env);

/// Output of `mpirun --tag-output` ("[JOB,RANK]<stdout>:TEXT") grouped by rank; stderr and
/// untagged lines are dropped. mpirun forwards output in fragments and tags each one, so
/// a long line may arrive as "[1,0]<stdout>:first half[1,0]<stdout>:second half\n":
/// fragments are joined back per rank.
std::map<int, std::string> SplitTaggedOutput(const std::string& output);

/// Cross-node checks (same driver, CUDA driver/runtime, NCCL, torch, MPI, GPU count and
/// model, NIC rates; a node that did not report): FAIL on a mismatch, naming the odd nodes.
std::vector<CheckResult> ConsistencyChecks(const std::vector<NodeReport>& nodes,
                                           const std::vector<std::string>& missing_hosts);

/// {"nodes": {HOST: {"facts", "exit"}}, "checks": [{"node", "name", "status", "detail",
/// "hint"}]}, the consistency checks with node "*".
nlohmann::ordered_json NodesJson(const std::vector<NodeReport>& nodes,
                                 const std::vector<CheckResult>& consistency);
/// One table: NODE  CHECK  STATUS  DETAIL, then the consistency checks (node "*").
void RenderNodesTable(const std::vector<NodeReport>& nodes,
                      const std::vector<CheckResult>& consistency, std::ostream& out);

/// Runs the doctor on every host of ARGS (--hosts or --job) and prints the result.
int RunDoctorNodes(const DoctorArgs& args, const DoctorEnv& env, std::ostream& out);

}  // namespace ringpilot::doctor
