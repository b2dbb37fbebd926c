#include "cli/version_command.h"

#include <algorithm>
#include <vector>

#include "cli/build_info.h"
#include "cli/run_command.h"
#include "doctor/doctor.h"

namespace ringpilot::cli {
namespace {

constexpr int kMpirunTimeoutS = 10;

// "loaded (compiled against X)" when they differ, else one of them.
std::string LoadedAndCompiled(const std::string& loaded, const std::string& compiled) {
  if (loaded.empty() && compiled.empty()) return "";
  if (loaded.empty()) return compiled + " (compiled against; not loadable here)";
  if (compiled.empty() || compiled == loaded) return loaded;
  return loaded + " (compiled against " + compiled + ")";
}

std::string FirstLine(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

}  // namespace

std::string VersionText(const base::Environment& env) {
  std::vector<std::pair<std::string, std::string>> rows;
  const doctor::DoctorEnv system = [&env] {
    doctor::DoctorEnv e = doctor::SystemDoctorEnv();
    e.vars = env;
    return e;
  }();

  const std::string trainer = TrainerPath(env);
  const doctor::TrainerVersions v = doctor::RunTrainerVersions(system, trainer);
  const doctor::CommandResult& r = v.run;
  if (v.versions) {
    rows.emplace_back("libtorch", v.Field("torch"));
    const std::string cuda = LoadedAndCompiled(v.Field("cuda_runtime"), v.Field("cuda_compiled"));
    rows.emplace_back("cuda runtime", cuda.empty() ? "none (CPU build)" : cuda);
    const std::string nccl = LoadedAndCompiled(v.Field("nccl_loaded"), v.Field("nccl_compiled"));
    rows.emplace_back("nccl", nccl.empty() ? "none (CPU build)" : nccl);
    const std::string cudnn = LoadedAndCompiled(v.Field("cudnn_loaded"), v.Field("cudnn_compiled"));
    if (!cudnn.empty()) rows.emplace_back("cudnn", cudnn);
    const std::string driver = v.Field("nvidia_driver");
    if (!driver.empty()) rows.emplace_back("nvidia driver", driver);
    rows.emplace_back("mpi", v.Field("mpi").empty() ? "unknown" : v.Field("mpi"));
  } else {
    const std::string why =
        !r.started ? "unknown: " + trainer +
                         " not found (build ringpilot-trainer, or set "
                         "RINGPILOT_TRAINER)"
        : r.timed_out ? "unknown: " + trainer + " --versions timed out"
                      : "unknown: " + trainer + " --versions failed: " + FirstLine(r.output);
    rows.emplace_back("libtorch", why);
  }
  const std::string mpirun = base::Lookup(env, "RINGPILOT_MPIRUN", "mpirun");
  const doctor::CommandResult m = system.run({mpirun, "--version"}, kMpirunTimeoutS);
  rows.emplace_back("mpirun", m.exit_code == 0 ? FirstLine(m.output)
                                               : "unknown: '" + mpirun + " --version' failed");
  const std::string prometheus = build_info::kPrometheusCpp;
  rows.emplace_back("prometheus-cpp",
                    prometheus.empty() ? "unknown (no pkg-config data at build)" : prometheus);
  const std::string yaml = build_info::kYamlCpp;
  rows.emplace_back("yaml-cpp", yaml.empty() ? "unknown" : yaml);

  const std::string commit = build_info::kGitCommit;
  std::string out = std::string("ringpilot ") + build_info::kVersion +
                    (commit.empty() ? " (git commit unknown)" : " (git " + commit + ")") + "\n";
  std::size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  for (const auto& [name, value] : rows) {
    out += "  " + name + std::string(width - name.size() + 2, ' ') + value + "\n";
  }
  return out;
}

}  // namespace ringpilot::cli
