// `ringpilot doctor --hosts H1:S,H2:S | --job JOB.yaml`: the doctor once per node through
// `mpirun -npernode 1 --tag-output`, each node printing one JSON line (--node-report), and
// cross-node consistency checks of what the nodes report.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "base/environment.h"
#include "base/files.h"
#include "doctor/check_context.h"
#include "doctor/command.h"
#include "doctor/detail_text.h"
#include "mpirun/flags.h"
#include "topology/probe.h"

namespace ringpilot::doctor {
namespace {

using base::ListDir;
using base::Lookup;

constexpr int kExitBadInput = 2;
constexpr int kNodesTimeoutS = 180;
constexpr int kProbeTimeoutS = 10;

std::string CudaVersionText(int v) {
  return v > 0 ? std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10) : "";
}

// torch's version from site-packages/torch/version.py beside LIB_DIR (torch/lib); "" if none.
std::string TorchVersion(const std::string& lib_dir) {
  std::istringstream in(ReadBytes(lib_dir + "/../version.py"));
  static const std::regex re(R"(^__version__\s*=\s*['"]([^'"]+)['"])");
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, re)) return m[1];
  }
  return "";
}

std::string FactText(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>().empty() ? "unknown" : v.get<std::string>();
  if (v.is_number_integer() && v.get<long long>() < 0) return "unknown";
  return v.dump();
}

bool Unknown(const nlohmann::ordered_json& v) {
  return v.is_null() || (v.is_string() && v.get<std::string>().empty()) ||
         (v.is_number_integer() && v.get<long long>() < 0);
}

struct FactSpec {
  const char* key;
  const char* what;
  const char* hint;
};
constexpr FactSpec kFacts[] = {
    {"driver", "NVIDIA driver", "install the same driver branch on every node"},
    {"cuda_driver", "CUDA version the driver supports", "install the same driver on every node"},
    {"cuda_runtime", "CUDA runtime ringpilot was built with",
     "deploy the same ringpilot build on every node"},
    {"nccl", "NCCL the trainer loads",
     "use one NCCL on every node (mismatched NCCL versions hang or fail in ncclCommInitRank): "
     "same container image or venv, same LD_LIBRARY_PATH"},
    {"torch", "LibTorch version", "deploy the same LibTorch / venv on every node"},
    {"mpi", "MPI", "install the same MPI on every node (mpirun's daemons must match)"},
    {"gpu_count", "GPUs the driver manages",
     "a node with fewer GPUs lost one (see gpus_visible on it) or is a different machine type"},
    {"gpu_models", "GPU models",
     "mixed GPU models make the slowest one the pace of every step: use a homogeneous node set"},
    {"nic_rates", "active InfiniBand/RoCE port rates",
     "a port trained at a lower rate or down on one node slows every all-reduce: check cables "
     "and switch ports (see infiniband_ports on that node)"},
};

}  // namespace

nlohmann::ordered_json NodeFacts(const DoctorEnv& env, const DriverInfo& drv) {
  nlohmann::ordered_json f;
  f["driver"] = drv.driver_version;
  f["cuda_driver"] = CudaVersionText(drv.cuda_driver_version);
  f["cuda_runtime"] = env.cuda_runtime_version == "unknown" ? "" : env.cuda_runtime_version;
  std::string nccl;
  std::string torch;
  const std::string trainer = TrainerPath(env);
  if (env.run && ::access(trainer.c_str(), X_OK) == 0) {
    const CommandResult ldd = env.run({"ldd", trainer}, kProbeTimeoutS);
    const std::string nccl_path = LddResolution(ldd.output, "libnccl.so");
    if (!nccl_path.empty() && nccl_path != "not found" && env.load_nccl) {
      const LibraryInfo lib = env.load_nccl(nccl_path);
      if (lib.loaded) nccl = NcclVersionText(lib.version);
    }
    const std::string torch_path = LddResolution(ldd.output, "libtorch_cpu.so");
    if (!torch_path.empty() && torch_path != "not found") {
      torch = TorchVersion(std::filesystem::path(torch_path).parent_path().string());
    }
  }
  f["nccl"] = nccl;
  f["torch"] = torch;
  std::string mpi;
  if (env.run) {
    const CommandResult ver =
        env.run({Lookup(env.vars, "RINGPILOT_MPIRUN", "mpirun"), "--version"}, kProbeTimeoutS);
    if (ver.started && ver.exit_code == 0) mpi = ParseMpiVersion(ver.output);
  }
  f["mpi"] = mpi;
  f["gpu_count"] = drv.nvml_device_count >= 0 ? drv.nvml_device_count : PresentGpuCount(env);
  std::vector<std::string> models;
  for (const DriverGpu& g : drv.gpus) models.push_back(g.name);
  if (models.empty()) {
    for (const CudaDevice& d : drv.cuda_devices) models.push_back(d.name);
  }
  std::sort(models.begin(), models.end());
  models.erase(std::unique(models.begin(), models.end()), models.end());
  f["gpu_models"] = Join(models, ", ");
  std::vector<std::string> rates;
  const std::string ib = env.sysfs_root + "/class/infiniband/";
  for (const std::string& dev : ListDir(ib)) {
    for (const std::string& p : ListDir(ib + dev + "/ports")) {
      const std::string dir = ib + dev + "/ports/" + p + "/";
      if (ReadTrimmed(dir + "state").find("ACTIVE") == std::string::npos) continue;
      std::ostringstream r;
      r << topology::ParseIbRate(ReadTrimmed(dir + "rate"));
      rates.push_back(r.str() + " Gb/s");
    }
  }
  std::sort(rates.begin(), rates.end());
  f["nic_rates"] = Join(rates, ", ");
  return f;
}

std::vector<config::HostSlots> ParseHostList(const std::string& text) {
  static const std::regex re(R"(^([A-Za-z0-9.-]+)(:([0-9]{1,4}))?$)");
  std::vector<config::HostSlots> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    std::smatch m;
    if (!std::regex_match(item, m, re) || (m[3].matched && std::stoi(m[3]) < 1)) {
      throw std::invalid_argument("--hosts: '" + item + "' is not HOST or HOST:SLOTS");
    }
    out.push_back({m[1], m[3].matched ? std::stoi(m[3]) : 1});
  }
  if (out.empty()) throw std::invalid_argument("--hosts: empty host list");
  return out;
}

std::vector<std::string> DoctorMpirunArgv(const std::string& mpirun, std::size_t hosts,
                                          const std::string& hostfile,
                                          const std::vector<std::string>& mpirun_args,
                                          const std::string& self, const std::string& device,
                                          unsigned euid, const base::Environment& env) {
  std::vector<std::string> argv = {mpirun,       "-np",         std::to_string(hosts),
                                   "--hostfile", hostfile,      "-npernode",
                                   "1",          "--tag-output"};
  // Several hosts: whether CMA works on each is not known here.
  mpirun::AppendBaseMpirunFlags(euid, mpirun_args, env, /*cma=*/false, &argv);
  for (const auto& [name, value] : env) {
    if (mpirun::IsForwardedVariable(name) || name == "RINGPILOT_TRAINER" ||
        name == "RINGPILOT_MPIRUN" || name == "RINGPILOT_LIBTORCH_CUDA") {
      argv.insert(argv.end(), {"-x", name});
    }
  }
  argv.insert(argv.end(), mpirun_args.begin(), mpirun_args.end());
  argv.insert(argv.end(), {self, "doctor", "--node-report", "--device", device});
  return argv;
}

std::map<int, std::string> SplitTaggedOutput(const std::string& output) {
  static const std::regex tag(R"(\[\d+,(\d+)\]<(stdout|stderr|stddiag)>:)");
  std::map<int, std::string> out;
  // Each fragment runs from its tag to the next tag, but not past its first newline:
  // what follows a newline without a tag is mpirun's own output.
  auto take = [&](int rank, std::size_t begin, std::size_t end) {
    const std::size_t nl = output.find('\n', begin);
    if (nl != std::string::npos && nl < end) end = nl + 1;
    if (rank >= 0) out[rank] += output.substr(begin, end - begin);
  };
  int rank = -1;  // of the fragment being read; -1: stderr or none yet
  std::size_t pos = 0;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), tag);
       it != std::sregex_iterator(); ++it) {
    const std::size_t at = static_cast<std::size_t>(it->position());
    if (pos > 0 || rank >= 0) take(rank, pos, at);
    rank = (*it)[2] == "stdout" ? std::stoi((*it)[1]) : -1;
    pos = at + static_cast<std::size_t>(it->length());
  }
  if (pos > 0) take(rank, pos, output.size());
  return out;
}

std::vector<CheckResult> ConsistencyChecks(const std::vector<NodeReport>& nodes,
                                           const std::vector<std::string>& missing_hosts) {
  std::vector<CheckResult> out;
  if (missing_hosts.empty()) {
    out.push_back(
        {"nodes_reported", CheckStatus::kPass,
         std::to_string(nodes.size()) + " of " + std::to_string(nodes.size()) + " nodes reported",
         ""});
  } else {
    out.push_back({"nodes_reported", CheckStatus::kFail,
                   "no report from " + Join(missing_hosts, ", ") + " (" +
                       std::to_string(nodes.size()) + " reported)",
                   "check that ringpilot is installed at the same path on every node and "
                   "that mpirun reaches it (the mpirun output above)"});
  }
  for (const FactSpec& spec : kFacts) {
    const std::string name = std::string("same_") + spec.key;
    std::vector<std::pair<std::string, std::vector<std::string>>> groups;
    bool any_known = false;
    for (const NodeReport& n : nodes) {
      const auto it = n.facts.find(spec.key);
      const nlohmann::ordered_json v = it == n.facts.end() ? nlohmann::ordered_json() : *it;
      any_known = any_known || !Unknown(v);
      const std::string text = FactText(v);
      auto g = std::find_if(groups.begin(), groups.end(),
                            [&](const auto& e) { return e.first == text; });
      if (g == groups.end()) {
        groups.push_back({text, {n.host}});
      } else {
        g->second.push_back(n.host);
      }
    }
    if (nodes.size() < 2 || !any_known) {
      out.push_back({name, CheckStatus::kSkip,
                     nodes.size() < 2 ? "fewer than two nodes reported"
                                      : std::string(spec.what) + " unknown on every node",
                     ""});
      continue;
    }
    if (groups.size() == 1) {
      const std::string value = groups.front().first;
      out.push_back({name, CheckStatus::kPass,
                     std::string(spec.what) + ": " + (value.empty() ? "(none)" : value) +
                         " on all " + std::to_string(nodes.size()) + " nodes",
                     ""});
      continue;
    }
    std::vector<std::string> parts;
    for (const auto& [value, hosts] : groups) {
      parts.push_back((value.empty() ? "(none)" : value) + " on " + Join(hosts, ", "));
    }
    out.push_back({name, CheckStatus::kFail,
                   std::string(spec.what) + " differs: " + Join(parts, "; "), spec.hint});
  }
  return out;
}

nlohmann::ordered_json NodesJson(const std::vector<NodeReport>& nodes,
                                 const std::vector<CheckResult>& consistency) {
  nlohmann::ordered_json doc;
  doc["nodes"] = nlohmann::ordered_json::object();
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  const auto add = [&](const std::string& node, const CheckResult& c) {
    checks.push_back({{"node", node},
                      {"name", c.name},
                      {"status", ToString(c.status)},
                      {"detail", c.detail},
                      {"hint", c.hint}});
  };
  for (const NodeReport& n : nodes) {
    doc["nodes"][n.host] = {{"facts", n.facts}, {"exit", DoctorExitStatus(n.checks)}};
    for (const CheckResult& c : n.checks) add(n.host, c);
  }
  for (const CheckResult& c : consistency) add("*", c);
  doc["checks"] = checks;
  return doc;
}

void RenderNodesTable(const std::vector<NodeReport>& nodes,
                      const std::vector<CheckResult>& consistency, std::ostream& out) {
  std::vector<std::pair<std::string, const CheckResult*>> rows;
  for (const NodeReport& n : nodes) {
    for (const CheckResult& c : n.checks) rows.push_back({n.host, &c});
  }
  for (const CheckResult& c : consistency) rows.push_back({"*", &c});
  std::size_t wn = 4;
  std::size_t wc = 5;
  for (const auto& [node, c] : rows) {
    wn = std::max(wn, node.size());
    wc = std::max(wc, c->name.size());
  }
  const auto pad = [](const std::string& s, std::size_t w) {
    return s + std::string(w > s.size() ? w - s.size() : 0, ' ');
  };
  out << pad("NODE", wn) << "  " << pad("CHECK", wc) << "  STATUS  DETAIL\n";
  int counts[4] = {0, 0, 0, 0};
  for (const auto& [node, c] : rows) {
    ++counts[static_cast<int>(c->status)];
    out << pad(node, wn) << "  " << pad(c->name, wc) << "  " << pad(ToString(c->status), 6) << "  "
        << c->detail << "\n";
    if (!c->hint.empty()) out << pad("", wn + wc + 2) << "          hint: " << c->hint << "\n";
  }
  out << "\n"
      << nodes.size() << (nodes.size() == 1 ? " node; " : " nodes; ") << counts[0] << " passed, "
      << counts[1] << " warnings, " << counts[2] << " failed, " << counts[3] << " skipped\n";
}

int RunDoctorNodes(const DoctorArgs& args, const DoctorEnv& env, std::ostream& out) {
  std::vector<config::HostSlots> hosts;
  std::vector<std::string> mpirun_args;
  std::string device = args.device;
  try {
    if (!args.hosts.empty()) {
      hosts = ParseHostList(args.hosts);
    } else {
      const config::JobConfig job = config::LoadJobConfig(args.job);
      if (job.launch.backend != config::Backend::kMpi) {
        throw std::invalid_argument(args.job + ": launch.backend is '" +
                                    ToString(job.launch.backend) +
                                    "'; --job needs backend mpi with launch.hosts (run "
                                    "`ringpilot doctor` on the node itself otherwise)");
      }
      hosts = job.launch.hosts;
      mpirun_args = job.launch.mpirun_args;
      if (device == "auto") device = ToString(job.world.device);
    }
  } catch (const std::exception& e) {  // ConfigError, std::invalid_argument
    std::cerr << "ringpilot doctor: " << e.what() << "\n";
    return kExitBadInput;
  }
  std::string dir = std::string(Lookup(env.vars, "TMPDIR", "/tmp")) + "/ringpilot-doctor-XXXXXX";
  if (!::mkdtemp(dir.data())) {
    std::cerr << "ringpilot doctor: cannot create a temporary directory " << dir << "\n";
    return 1;
  }
  const std::string hostfile = dir + "/hostfile";
  std::string content;
  for (const config::HostSlots& h : hosts)
    content += h.host + " slots=" + std::to_string(h.slots) + "\n";
  const std::string mpirun = Lookup(env.vars, "RINGPILOT_MPIRUN", "mpirun");
  CommandResult run;
  try {
    WriteDoctorFile(hostfile, content);
    const std::vector<std::string> argv =
        DoctorMpirunArgv(mpirun, hosts.size(), hostfile, mpirun_args, base::SelfExecutablePath(),
                         device, static_cast<unsigned>(::geteuid()), env.vars);
    run = env.run(argv, kNodesTimeoutS);
  } catch (const std::runtime_error& e) {
    std::cerr << "ringpilot doctor: " << e.what() << "\n";
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::vector<NodeReport> nodes;
  std::vector<std::string> missing;
  const std::map<int, std::string> by_rank = SplitTaggedOutput(run.output);
  for (std::size_t r = 0; r < hosts.size(); ++r) {
    const auto it = by_rank.find(static_cast<int>(r));
    NodeReport report;
    bool ok = false;
    if (it != by_rank.end()) {
      std::istringstream in(it->second);
      for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] != '{') continue;
        const auto doc = nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (doc.is_discarded() || !doc.contains("checks")) continue;
        report.host = doc.value("host", hosts[r].host);
        if (report.host != hosts[r].host) report.host += " (" + hosts[r].host + ")";
        report.facts = doc.value("facts", nlohmann::ordered_json::object());
        for (const auto& c : doc["checks"]) {
          const std::string s = c.value("status", "SKIP");
          const CheckStatus status = s == "PASS"   ? CheckStatus::kPass
                                     : s == "WARN" ? CheckStatus::kWarn
                                     : s == "FAIL" ? CheckStatus::kFail
                                                   : CheckStatus::kSkip;
          report.checks.push_back(
              {c.value("name", ""), status, c.value("detail", ""), c.value("hint", "")});
        }
        ok = true;
      }
    }
    if (ok) {
      nodes.push_back(std::move(report));
    } else {
      missing.push_back(hosts[r].host);
    }
  }
  if (nodes.empty()) {
    std::cerr << "ringpilot doctor: no node reported; `mpirun` "
              << (!run.started    ? "could not be started (" + mpirun + ")"
                  : run.timed_out ? "timed out after " + std::to_string(kNodesTimeoutS) + " s"
                                  : "exited " + std::to_string(run.exit_code))
              << ". Its output:\n"
              << run.output;
    return 1;
  }
  if (!missing.empty()) {
    // nodes_reported's hint points at this output: what mpirun or the node printed instead.
    std::cerr << "ringpilot doctor: no report from " << Join(missing, ", ") << "; `mpirun` "
              << (run.timed_out ? "timed out after " + std::to_string(kNodesTimeoutS) + " s"
                                : "exited " + std::to_string(run.exit_code))
              << ". Its output:\n"
              << run.output;
  }
  const std::vector<CheckResult> consistency = ConsistencyChecks(nodes, missing);
  if (args.json) {
    out << NodesJson(nodes, consistency).dump(2) << "\n";
  } else {
    RenderNodesTable(nodes, consistency, out);
  }
  std::vector<NodeChecks> all;
  int status = DoctorExitStatus(consistency);
  for (const NodeReport& n : nodes) {
    all.push_back({n.host, n.checks});
    status = std::max(status, DoctorExitStatus(n.checks));
  }
  all.push_back({"*", consistency});
  if (!args.prometheus.empty()) {
    try {
      WriteDoctorFile(args.prometheus,
                      DoctorPrometheus(all, static_cast<double>(std::time(nullptr))));
    } catch (const std::runtime_error& e) {
      std::cerr << "ringpilot doctor: --prometheus: " << e.what() << "\n";
      return kExitBadInput;
    }
  }
  return status;
}

}  // namespace ringpilot::doctor
