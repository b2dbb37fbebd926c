// Doctor check library_versions: runs `ringpilot-trainer --versions` (trainer/telemetry/versions.h)
// and compares the NCCL and cuDNN the trainer actually loads with the ones it was built against.
#include <unistd.h>

#include <array>
#include <optional>
#include <regex>
#include <sstream>

#include "doctor/check_context.h"
#include "doctor/detail_text.h"
#include "doctor/doctor.h"

namespace ringpilot::doctor {
namespace {

// "2.28.9" -> {2, 28, 9}; nullopt unless it starts with MAJOR.MINOR.
std::optional<std::array<int, 3>> ParseDotted(const std::string& text) {
  static const std::regex re(R"(^(\d+)\.(\d+)(?:\.(\d+))?)");
  std::smatch m;
  if (!std::regex_search(text, m, re)) return std::nullopt;
  return std::array<int, 3>{std::stoi(m[1]), std::stoi(m[2]), m[3].matched ? std::stoi(m[3]) : 0};
}

// "Open MPI v4.1.6, package: ..." -> "Open MPI 4.1.6"; "MPICH Version:  4.0" -> "MPICH 4.0".
std::string ShortMpi(const std::string& line) {
  const std::string head = line.substr(0, line.find(','));
  static const std::regex re(R"(^(.*?)\s+(?:Version:\s*)?v?(\d[0-9A-Za-z.\-]*))");
  std::smatch m;
  if (std::regex_search(head, m, re)) return m[1].str() + " " + m[2].str();
  return head;
}

struct Verdict {
  CheckStatus status = CheckStatus::kPass;
  std::vector<std::string> hints;
  void Raise(CheckStatus s, const std::string& hint) {
    if (s == CheckStatus::kFail || (s == CheckStatus::kWarn && status == CheckStatus::kPass)) {
      status = s;
    }
    hints.push_back(hint);
  }
};

// NCCL loaded vs compiled: part of the detail, and the verdict.
std::string CompareNccl(const std::string& compiled, const std::string& loaded,
                        const std::string& path, const std::string& cmd, Verdict* v) {
  const std::string where = path.empty() ? "" : " from " + path;
  const std::string mismatch_hint =
      "the trainer loads NCCL " + loaded + where + " but was built against " + compiled +
      ": a directory on LD_LIBRARY_PATH (or in ld.so.conf) holding another libnccl.so.2 wins "
      "over the nvidia-nccl wheel beside LibTorch (site-packages/nvidia/nccl/lib); drop it "
      "from LD_LIBRARY_PATH, or pip install the nvidia-nccl version LibTorch pins";
  if (loaded.empty()) {
    v->Raise(CheckStatus::kFail,
             "ncclGetVersion failed in the trainer; run `NCCL_DEBUG=INFO " + cmd + "` by hand");
    return "NCCL ? loaded (built against " + compiled + ")";
  }
  const std::string text = "NCCL " + loaded + " loaded (built against " + compiled + ")";
  const auto c = ParseDotted(compiled);
  const auto l = ParseDotted(loaded);
  if (!c || !l) {
    v->Raise(CheckStatus::kWarn, "unrecognised NCCL version text; run `" + cmd + "` by hand");
    return text;
  }
  if ((*l)[0] != (*c)[0]) {
    v->Raise(CheckStatus::kFail, "NCCL major version differs: " + mismatch_hint);
  } else if ((*l)[1] < (*c)[1]) {
    v->Raise(CheckStatus::kFail, "the loaded NCCL is older than the headers: " + mismatch_hint);
  } else if (*l != *c) {
    v->Raise(CheckStatus::kWarn,
             "NCCL differs from the build's (same major, compatible): " + mismatch_hint);
  }
  return text;
}

std::string CompareCudnn(const std::string& compiled, const std::string& loaded, Verdict* v) {
  if (loaded.empty() || compiled.empty() || loaded == compiled) {
    return "cuDNN " + (loaded.empty() ? compiled : loaded);
  }
  const auto c = ParseDotted(compiled);
  const auto l = ParseDotted(loaded);
  if (c && l && ((*c)[0] != (*l)[0] || (*c)[1] != (*l)[1])) {
    v->Raise(CheckStatus::kWarn,
             "LibTorch was built against cuDNN " + compiled + " but loads " + loaded +
                 ": another libcudnn.so on LD_LIBRARY_PATH wins over the nvidia-cudnn wheel "
                 "(site-packages/nvidia/cudnn/lib); kernels may be missing or slower");
  }
  return "cuDNN " + loaded + " (built against " + compiled + ")";
}

}  // namespace

std::string TrainerVersions::Field(const char* key) const {
  if (!versions) return "";
  const auto it = versions->find(key);
  return it != versions->end() && it->is_string() ? it->get<std::string>() : std::string();
}

TrainerVersions RunTrainerVersions(const DoctorEnv& env, const std::string& trainer) {
  TrainerVersions v;
  v.run = env.run({trainer, "--versions"}, kTrainerVersionsTimeoutS);
  if (v.run.exit_code != 0) return v;
  std::istringstream in(v.run.output);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '{') continue;
    auto doc = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (doc.is_object()) v.versions = std::move(doc);
  }
  return v;
}

CheckResult CheckLibraryVersions(const DoctorEnv& env) {
  const std::string name = "library_versions";
  const std::string trainer = TrainerPath(env);
  if (::access(trainer.c_str(), X_OK) != 0) {
    return {name, CheckStatus::kSkip, "ringpilot-trainer not found at " + trainer, ""};
  }
  if (env.quick) {
    return {name, CheckStatus::kSkip,
            "quick preflight: `" + trainer + " --versions` not run (loads LibTorch)", ""};
  }
  const std::string cmd = trainer + " --versions";
  const std::string run_hint = "run `" + cmd +
                               "` by hand; a loader error (missing library) is explained by "
                               "trainer_libraries";
  const TrainerVersions versions = RunTrainerVersions(env, trainer);
  const CommandResult& r = versions.run;
  if (!r.started) return {name, CheckStatus::kFail, "`" + cmd + "` could not be run", run_hint};
  if (r.timed_out || r.exit_code != 0) {
    const std::string last = LastLine(r.output);
    return {name, CheckStatus::kFail,
            "`" + cmd + "` " +
                (r.timed_out ? "timed out after " + std::to_string(kTrainerVersionsTimeoutS) + " s"
                             : "exited " + std::to_string(r.exit_code)) +
                (last.empty() ? "" : ": " + last),
            run_hint};
  }
  if (!versions.versions) {
    return {
        name, CheckStatus::kFail, "`" + cmd + "` printed no JSON object: " + LastLine(r.output),
        "a trainer built before --versions existed? rebuild it (scripts/build.sh); " + run_hint};
  }
  const auto field = [&versions](const char* key) { return versions.Field(key); };
  Verdict v;
  std::vector<std::string> parts{"LibTorch " + (field("torch").empty() ? "?" : field("torch"))};
  if (field("cuda_compiled").empty()) {
    parts.push_back("CPU-only build (no CUDA, cuDNN, NCCL)");
  } else {
    const std::string driver = field("cuda_driver");
    parts.push_back("CUDA " + field("cuda_compiled") + " (runtime " + field("cuda_runtime") +
                    ", driver " + (driver.empty() ? "none" : driver) + ")");
    if (!field("cudnn_compiled").empty() || !field("cudnn_loaded").empty()) {
      parts.push_back(CompareCudnn(field("cudnn_compiled"), field("cudnn_loaded"), &v));
    }
    if (!field("nccl_compiled").empty()) {
      parts.push_back(
          CompareNccl(field("nccl_compiled"), field("nccl_loaded"), field("nccl_path"), cmd, &v));
    }
  }
  if (!field("mpi").empty()) parts.push_back(ShortMpi(field("mpi")));
  return {name, v.status, Join(parts, ", "), Join(v.hints, "; ")};
}

}  // namespace ringpilot::doctor
