#include "launcher/doctor_command.h"

#include <cstdlib>
#include <iostream>
#include <memory>

namespace ringpilot::launcher {

void AddDoctorCommand(CLI::App& app) {
  auto args = std::make_shared<DoctorArgs>();
  CLI::App* doctor = app.add_subcommand(
      "doctor",
      "Preflight checks of this node (driver, GPUs, /dev/shm, memlock, InfiniBand, "
      "PCIe ACS, IOMMU, NUMA, MPI, trainer libraries); exit 1 on FAIL");
  doctor->add_flag("--json", args->json,
                   "Print {\"checks\": [{\"name\", \"status\", \"detail\", \"hint\"}, ...]}");
  doctor->add_option("--device", args->device, "Which checks apply: cpu skips the GPU checks")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  doctor->callback([args] {
    const int status = RunDoctorCommand(*args, SystemDoctorEnv(), std::cout);
    std::cout.flush();
    std::exit(status);
  });
}

int RunDoctorCommand(const DoctorArgs& args, const DoctorEnv& env, std::ostream& out) {
  const DoctorDevice dev = args.device == "cpu"    ? DoctorDevice::kCpu
                           : args.device == "cuda" ? DoctorDevice::kCuda
                                                   : DoctorDevice::kAuto;
  const std::vector<CheckResult> checks = RunDoctor(env, dev);
  if (args.json) {
    out << DoctorJson(checks).dump(2) << "\n";
  } else {
    RenderDoctorTable(checks, out);
  }
  return DoctorExitStatus(checks);
}

}  // namespace ringpilot::launcher
