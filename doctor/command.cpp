#include "doctor/command.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <iostream>
#include <memory>

#include "base/environment.h"

namespace ringpilot::doctor {
namespace {

constexpr int kExitBadInput = 2;

// Under `mpirun` (--node-report), the launcher's variables make the mpi check's own
// `mpirun -np 2 true` believe it is a rank of the outer job: drop them, keeping the
// user's transport choices (btl, oob, plm) and the run-as-root consent.
void DropOuterMpirunVariables() {
  std::vector<std::string> drop;
  for (const auto& variable : base::CurrentEnvironment()) {
    const std::string& name = variable.first;  // a lambda may not capture a binding (C++17)
    const auto starts = [&](const char* p) { return name.rfind(p, 0) == 0; };
    const bool keep = starts("OMPI_ALLOW_RUN_AS_ROOT") || starts("OMPI_MCA_btl_") ||
                      starts("OMPI_MCA_oob_") || starts("OMPI_MCA_plm_");
    if (!keep && (starts("OMPI_") || starts("PMIX_") || starts("OPAL_") || starts("ORTE_") ||
                  starts("PRTE_"))) {
      drop.push_back(name);
    }
  }
  for (const std::string& name : drop) ::unsetenv(name.c_str());
}

}  // namespace

config::Device ParseDeviceOption(const std::string& name) {
  return name == "cpu"    ? config::Device::kCpu
         : name == "cuda" ? config::Device::kCuda
                          : config::Device::kAuto;
}

void AddDoctorCommand(CLI::App& app) {
  auto args = std::make_shared<DoctorArgs>();
  CLI::App* doctor = app.add_subcommand(
      "doctor",
      "Preflight checks of this node, or of every node with --hosts/--job (driver, GPUs, "
      "compute capability vs LibTorch, P2P, /dev/shm, memlock, InfiniBand, PCIe ACS, IOMMU, "
      "NUMA, MPI, trainer libraries); exit 1 on FAIL");
  doctor->add_flag("--json", args->json,
                   "Print {\"checks\": [{\"name\", \"status\", \"detail\", \"hint\"}, ...]} "
                   "(across nodes: {\"nodes\": {...}, \"checks\": [... \"node\" ...]})");
  doctor->add_option("--device", args->device, "Which checks apply: cpu skips the GPU checks")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  doctor
      ->add_option("--prometheus,--metrics-file", args->prometheus,
                   "Also write the results as Prometheus text to FILE (atomically; for "
                   "node_exporter's textfile collector)")
      ->type_name("FILE");
  CLI::Option* hosts =
      doctor
          ->add_option("--hosts", args->hosts,
                       "Run on every node of H1[:SLOTS],H2[:SLOTS] through mpirun -npernode 1 "
                       "and compare the nodes")
          ->type_name("LIST");
  doctor
      ->add_option("--job", args->job,
                   "Run on every node of a job file's launch.hosts (with its mpirun_args)")
      ->type_name("JOB.yaml")
      ->excludes(hosts);
  doctor
      ->add_flag("--node-report", args->node_report,
                 "One JSON line {host, facts, checks} (what --hosts runs on each node)")
      ->group("");
  doctor->callback([args] {
    if (args->node_report) DropOuterMpirunVariables();
    const DoctorEnv env = SystemDoctorEnv();
    const int status = args->hosts.empty() && args->job.empty()
                           ? RunDoctorCommand(*args, env, std::cout)
                           : RunDoctorNodes(*args, env, std::cout);
    std::cout.flush();
    std::exit(status);
  });
}

int RunDoctorCommand(const DoctorArgs& args, const DoctorEnv& env, std::ostream& out) {
  DriverInfo drv;
  const std::vector<CheckResult> checks = RunDoctor(env, ParseDeviceOption(args.device), &drv);
  if (args.node_report) {
    nlohmann::ordered_json line = DoctorJson(checks);
    nlohmann::ordered_json doc;
    doc["host"] = base::HostName();
    doc["facts"] = NodeFacts(env, drv);
    doc["checks"] = line["checks"];
    out << doc.dump() << "\n";
  } else if (args.json) {
    out << DoctorJson(checks).dump(2) << "\n";
  } else {
    RenderDoctorTable(checks, out);
  }
  if (!args.prometheus.empty()) {
    try {
      WriteDoctorFile(args.prometheus,
                      DoctorPrometheus({{"", checks}}, static_cast<double>(std::time(nullptr))));
    } catch (const std::runtime_error& e) {
      std::cerr << "ringpilot doctor: --prometheus: " << e.what() << "\n";
      return kExitBadInput;
    }
  }
  // A node's report carries its verdict; exiting non-zero would make mpirun abort the job
  // and kill the nodes that have not printed theirs yet (`doctor --job` lost healthy nodes).
  if (args.node_report) return 0;
  return DoctorExitStatus(checks);
}

bool RunPreflight(DoctorEnv env, config::Device dev, const std::string& run_dir, bool force,
                  std::ostream& err) {
  env.quick = true;
  const std::vector<CheckResult> checks = RunDoctor(env, dev);
  try {
    WriteDoctorFile(run_dir + "/doctor.json", DoctorJson(checks).dump(2) + "\n");
    WriteDoctorFile(run_dir + "/doctor.prom",
                    DoctorPrometheus({{"", checks}}, static_cast<double>(std::time(nullptr))));
  } catch (const std::runtime_error& e) {
    err << "ringpilot: preflight: " << e.what() << "\n";
  }
  const bool failed = DoctorExitStatus(checks) != 0;
  for (const CheckResult& c : checks) {
    if (c.status != CheckStatus::kWarn && c.status != CheckStatus::kFail) continue;
    err << "ringpilot: preflight: " << ToString(c.status) << " " << c.name << ": " << c.detail
        << (c.hint.empty() ? "" : " (hint: " + c.hint + ")") << "\n";
  }
  if (failed) {
    err << "ringpilot: preflight: "
        << (force ? "FAIL overridden by --force, starting anyway"
                  : "not starting: a check FAILed (details in " + run_dir +
                        "/doctor.json; `ringpilot doctor` to re-check; --force or "
                        "launch.preflight: false to start anyway)")
        << "\n";
  }
  return !failed || force;
}

}  // namespace ringpilot::doctor
