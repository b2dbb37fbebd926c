// Doctor check library_versions: `ringpilot-trainer --versions` output injected through the
// fake command runner for each status; a scripted trainer through the real runner; and the
// real trainer of this build where it exists.
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "doctor/doctor.h"
#include "tests/test_util.h"

namespace ringpilot::doctor {
namespace {

using testing::TempDir;
using testing::WriteFile;

// A healthy `--versions` object (CUDA build, everything matching); tests change fields.
nlohmann::ordered_json GoodVersions() {
  return {{"torch", "2.11.0"},
          {"cuda_compiled", "13.0"},
          {"cuda_runtime", "13.0"},
          {"cuda_driver", "13.0"},
          {"nvidia_driver", "580.65.06"},
          {"cudnn_compiled", "9.19.0"},
          {"cudnn_loaded", "9.19.0"},
          {"nccl_compiled", "2.28.9"},
          {"nccl_loaded", "2.28.9"},
          {"nccl_path", "/venv/nvidia/nccl/lib/libnccl.so.2"},
          {"mpi", "Open MPI v4.1.6, package: Debian OpenMPI, ident: 4.1.6, repo rev: v4.1.6"},
          {"mpi_standard", "3.1"}};
}

// An executable trainer file under TMP and a runner answering `TRAINER --versions` with
// RESULT (recording the argv and timeout it was called with).
struct Fixture {
  TempDir tmp;
  DoctorEnv env;
  std::string trainer = tmp.path() + "/ringpilot-trainer";
  std::vector<std::string> argv;
  int timeout_s = 0;
  CommandResult result;

  Fixture() {
    WriteFile(trainer, "#!/bin/sh\nexit 0\n", true);
    env.vars["RINGPILOT_TRAINER"] = trainer;
    env.run = [this](const std::vector<std::string>& a, int t) {
      argv = a;
      timeout_s = t;
      return result;
    };
  }
  CheckResult Run(const nlohmann::ordered_json& versions, const std::string& prefix = "") {
    result = CommandResult{true, false, 0, prefix + versions.dump() + "\n"};
    return CheckLibraryVersions(env);
  }
};

TEST(DoctorLibraryVersions, MatchingPassesWithSummary) {
  Fixture f;
  const CheckResult r = f.Run(GoodVersions(), "[W warning from LibTorch on stderr]\n");
  EXPECT_EQ(r.name, "library_versions");
  EXPECT_EQ(r.status, CheckStatus::kPass) << r.detail << " / " << r.hint;
  EXPECT_EQ(r.detail,
            "LibTorch 2.11.0, CUDA 13.0 (runtime 13.0, driver 13.0), cuDNN 9.19.0, NCCL 2.28.9 "
            "loaded (built against 2.28.9), Open MPI 4.1.6");
  EXPECT_TRUE(r.hint.empty()) << r.hint;
  EXPECT_EQ(f.argv, (std::vector<std::string>{f.trainer, "--versions"}));
  EXPECT_GE(f.timeout_s, 10);
}

TEST(DoctorLibraryVersions, NcclMajorDifferenceOrOlderMinorFails) {
  Fixture f;
  auto v = GoodVersions();
  v["nccl_loaded"] = "3.0.1";
  CheckResult r = f.Run(v);
  EXPECT_EQ(r.status, CheckStatus::kFail) << r.detail;
  EXPECT_NE(r.detail.find("NCCL 3.0.1 loaded (built against 2.28.9)"), std::string::npos)
      << r.detail;
  EXPECT_NE(r.hint.find("major"), std::string::npos) << r.hint;
  EXPECT_NE(r.hint.find("LD_LIBRARY_PATH"), std::string::npos) << r.hint;
  EXPECT_NE(r.hint.find("/venv/nvidia/nccl/lib/libnccl.so.2"), std::string::npos) << r.hint;

  v["nccl_loaded"] = "2.21.5";
  r = f.Run(v);
  EXPECT_EQ(r.status, CheckStatus::kFail) << r.detail;
  EXPECT_NE(r.hint.find("older"), std::string::npos) << r.hint;

  v["nccl_loaded"] = "";  // ncclGetVersion failed
  r = f.Run(v);
  EXPECT_EQ(r.status, CheckStatus::kFail) << r.detail;
  EXPECT_NE(r.hint.find("ncclGetVersion"), std::string::npos) << r.hint;
}

TEST(DoctorLibraryVersions, NcclPatchOrNewerMinorWarns) {
  Fixture f;
  auto v = GoodVersions();
  v["nccl_loaded"] = "2.28.3";
  CheckResult r = f.Run(v);
  EXPECT_EQ(r.status, CheckStatus::kWarn) << r.detail;
  EXPECT_NE(r.hint.find("nvidia-nccl"), std::string::npos) << r.hint;
  v["nccl_loaded"] = "2.29.2";
  r = f.Run(v);
  EXPECT_EQ(r.status, CheckStatus::kWarn) << r.detail;
}

TEST(DoctorLibraryVersions, CudnnMinorDifferenceWarnsPatchDoesNot) {
  Fixture f;
  auto v = GoodVersions();
  v["cudnn_loaded"] = "9.1.0";
  CheckResult r = f.Run(v);
  EXPECT_EQ(r.status, CheckStatus::kWarn) << r.detail;
  EXPECT_NE(r.detail.find("cuDNN 9.1.0 (built against 9.19.0)"), std::string::npos) << r.detail;
  EXPECT_NE(r.hint.find("cuDNN"), std::string::npos) << r.hint;
  v["cudnn_loaded"] = "9.19.1";
  r = f.Run(v);
  EXPECT_EQ(r.status, CheckStatus::kPass) << r.detail << " / " << r.hint;
  // A cuDNN warning does not hide an NCCL failure; both hints are given.
  v["cudnn_loaded"] = "8.9.7";
  v["nccl_loaded"] = "2.18.1";
  r = f.Run(v);
  EXPECT_EQ(r.status, CheckStatus::kFail) << r.detail;
  EXPECT_NE(r.hint.find("cuDNN"), std::string::npos) << r.hint;
  EXPECT_NE(r.hint.find("NCCL"), std::string::npos) << r.hint;
}

TEST(DoctorLibraryVersions, CpuBuildAndNoDriverPass) {
  Fixture f;
  nlohmann::ordered_json v = GoodVersions();
  for (const char* k :
       {"cuda_compiled", "cuda_runtime", "cuda_driver", "nvidia_driver", "cudnn_compiled",
        "cudnn_loaded", "nccl_compiled", "nccl_loaded", "nccl_path"}) {
    v[k] = "";
  }
  v["mpi"] = "MPICH Version:      4.0";
  CheckResult r = f.Run(v);
  EXPECT_EQ(r.status, CheckStatus::kPass) << r.detail;
  EXPECT_EQ(r.detail, "LibTorch 2.11.0, CPU-only build (no CUDA, cuDNN, NCCL), MPICH 4.0");
  v = GoodVersions();
  v["cuda_driver"] = "";
  r = f.Run(v);
  EXPECT_EQ(r.status, CheckStatus::kPass) << r.detail;
  EXPECT_NE(r.detail.find("(runtime 13.0, driver none)"), std::string::npos) << r.detail;
}

TEST(DoctorLibraryVersions, CommandFailuresFail) {
  Fixture f;
  f.result = CommandResult{false, false, -1, ""};
  CheckResult r = CheckLibraryVersions(f.env);
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_NE(r.hint.find("by hand"), std::string::npos) << r.hint;
  f.result = CommandResult{true, false, 127,
                           "ringpilot-trainer: error while loading shared libraries: "
                           "libnccl.so.2: cannot open shared object file\n"};
  r = CheckLibraryVersions(f.env);
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_NE(r.detail.find("exited 127: ringpilot-trainer: error while loading"), std::string::npos)
      << r.detail;
  EXPECT_NE(r.hint.find("trainer_libraries"), std::string::npos) << r.hint;
  f.result = CommandResult{true, true, -1, ""};
  r = CheckLibraryVersions(f.env);
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_NE(r.detail.find("timed out"), std::string::npos) << r.detail;
  // Exit 0 without a JSON object (not a ringpilot-trainer, or a broken one).
  f.result = CommandResult{true, false, 0, "usage: ringpilot-trainer\n"};
  r = CheckLibraryVersions(f.env);
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_NE(r.detail.find("no JSON"), std::string::npos) << r.detail;
}

TEST(DoctorLibraryVersions, SkipsWithoutTrainerAndInQuickMode) {
  Fixture f;
  f.env.vars["RINGPILOT_TRAINER"] = f.tmp.path() + "/missing-trainer";
  bool ran = false;
  f.env.run = [&](const std::vector<std::string>&, int) {
    ran = true;
    return CommandResult{};
  };
  CheckResult r = CheckLibraryVersions(f.env);
  EXPECT_EQ(r.status, CheckStatus::kSkip);
  EXPECT_NE(r.detail.find("missing-trainer"), std::string::npos) << r.detail;
  f.env.vars["RINGPILOT_TRAINER"] = f.trainer;
  f.env.quick = true;
  r = CheckLibraryVersions(f.env);
  EXPECT_EQ(r.status, CheckStatus::kSkip);
  EXPECT_FALSE(ran);
}

// The real runner (fork/exec with a timeout) against a scripted trainer that answers only
// `--versions`, with an NCCL found on LD_LIBRARY_PATH that is older than the headers.
TEST(DoctorLibraryVersions, RealRunnerWithScriptedTrainer) {
  TempDir tmp;
  const std::string trainer = tmp.path() + "/ringpilot-trainer";
  auto v = GoodVersions();
  v["nccl_loaded"] = "2.26.2";
  v["nccl_path"] = "/usr/lib/x86_64-linux-gnu/libnccl.so.2";
  WriteFile(
      trainer,
      "#!/bin/sh\n[ \"$1\" = --versions ] || exit 3\necho 'noise' >&2\necho '" + v.dump() + "'\n",
      true);
  DoctorEnv env = SystemDoctorEnv();
  env.vars["RINGPILOT_TRAINER"] = trainer;
  const CheckResult r = CheckLibraryVersions(env);
  EXPECT_EQ(r.status, CheckStatus::kFail) << r.detail;
  EXPECT_NE(r.detail.find("NCCL 2.26.2 loaded (built against 2.28.9)"), std::string::npos)
      << r.detail;
  EXPECT_NE(r.hint.find("/usr/lib/x86_64-linux-gnu/libnccl.so.2"), std::string::npos) << r.hint;
}

// This build's ringpilot-trainer, where it was built (RINGPILOT_TRAINER=ON): on this machine
// the trainer loads the NCCL it was compiled against, so the check passes.
TEST(DoctorLibraryVersions, ThisBuildsTrainerPasses) {
  const char* build = std::getenv("RINGPILOT_BUILD_DIR");
  const std::string trainer = std::string(build ? build : "build") + "/bin/ringpilot-trainer";
  if (::access(trainer.c_str(), X_OK) != 0) GTEST_SKIP() << "no trainer at " << trainer;
  DoctorEnv env = SystemDoctorEnv();
  env.vars["RINGPILOT_TRAINER"] = trainer;
  const CheckResult r = CheckLibraryVersions(env);
  EXPECT_EQ(r.status, CheckStatus::kPass) << r.detail << " / " << r.hint;
  EXPECT_EQ(r.detail.rfind("LibTorch ", 0), 0u) << r.detail;
  EXPECT_NE(r.detail.find("MPI"), std::string::npos) << r.detail;
}

// `ringpilot doctor` end to end with an older libnccl.so.2 (the 2.21.5 stand-in) first on
// LD_LIBRARY_PATH: the trainer's RUNPATH loses to it, trainer_libraries still passes, and
// library_versions names the mismatch and the file loaded.
TEST(DoctorLibraryVersions, OlderNcclOnLibraryPathFailsEndToEnd) {
  const std::string build =
      std::getenv("RINGPILOT_BUILD_DIR") ? std::getenv("RINGPILOT_BUILD_DIR") : "build";
  const std::string trainer = build + "/bin/ringpilot-trainer";
  if (::access(trainer.c_str(), X_OK) != 0) GTEST_SKIP() << "no trainer at " << trainer;
  const std::string dir = build + "/tests/doctor_fixture/nccl2";
  ASSERT_TRUE(std::filesystem::exists(dir + "/libnccl.so.2")) << dir << ": build doctor_fake_nccl2";
  const auto r =
      testing::RunProcess({testing::RingpilotBinary(), "doctor", "--json", "--device", "cpu"},
                          {{"RINGPILOT_TRAINER", trainer}, {"LD_LIBRARY_PATH", dir}});
  const auto doc = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(doc.is_object()) << r.out << r.err;
  nlohmann::json check;
  for (const auto& c : doc.at("checks")) {
    if (c.at("name") == "library_versions") check = c;
  }
  ASSERT_TRUE(check.is_object()) << r.out;
  const std::string detail = check.value("detail", "");
  if (detail.find("CPU-only build") != std::string::npos) GTEST_SKIP() << "trainer without NCCL";
  EXPECT_EQ(check.value("status", ""), "FAIL") << check.dump();
  EXPECT_NE(detail.find("NCCL 2.21.5 loaded (built against "), std::string::npos) << detail;
  EXPECT_NE(check.value("hint", "").find(dir + "/libnccl.so.2"), std::string::npos) << check.dump();
  EXPECT_EQ(r.exit_code, 1) << r.out;
}

}  // namespace
}  // namespace ringpilot::doctor
