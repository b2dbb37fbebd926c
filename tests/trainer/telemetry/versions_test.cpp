// trainer/telemetry/versions.h: version texts, the in-process query against the venv's torch (an
// independent view of the same LibTorch, cuDNN and NCCL wheels), build-info labels, and
// `ringpilot-trainer --versions` end to end.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "base/subprocess.h"
#include "trainer/telemetry/versions.h"

namespace ringpilot::trainer::telemetry {
namespace {

// stdout of the shell command CMD and its exit status.
std::pair<std::string, int> Capture(const std::string& cmd) {
  base::SpawnOptions o;
  o.argv = {"/bin/sh", "-c", cmd};
  o.stdout_to = base::ChildOutput::kPipe;
  const base::RunResult run = base::RunToEnd(o);
  return {run.output, run.status.term_signal == 0 ? run.status.exit_code : -1};
}

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

bool IsDotted(const std::string& s) { return std::regex_match(s, std::regex(R"(\d+\.\d+\.\d+)")); }

TEST(Versions, Texts) {
  EXPECT_EQ(CudaVersionText(13000), "13.0");
  EXPECT_EQ(CudaVersionText(12080), "12.8");
  EXPECT_EQ(CudaVersionText(0), "");
  EXPECT_EQ(CudnnVersionText(91900), "9.19.0");
  EXPECT_EQ(CudnnVersionText(90100), "9.1.0");
  EXPECT_EQ(CudnnVersionText(8902), "8.9.2");
  EXPECT_EQ(CudnnVersionText(0), "");
  EXPECT_EQ(NcclVersionText(22809), "2.28.9");
  EXPECT_EQ(NcclVersionText(2708), "2.7.8");
  EXPECT_EQ(NcclVersionText(0), "");
}

TEST(Versions, BuildInfoLabels) {
  LibraryVersions v;
  v.torch = "2.11.0";
  v.mpi = "Open MPI v4.1.6, package: Debian OpenMPI";
  v.cuda_driver = "13.0";
  using Labels = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(BuildInfoLabels(v), (Labels{{"torch", "2.11.0"},
                                        {"cuda", "none"},
                                        {"cudnn", "none"},
                                        {"nccl", "none"},
                                        {"mpi", "Open MPI v4.1.6"},
                                        {"driver", "13.0"}}));
  v.cuda_runtime = "13.0";
  v.cudnn_loaded = "9.19.0";
  v.nccl_loaded = "2.28.9";
  v.nvidia_driver = "580.65.06";
  const Labels l = BuildInfoLabels(v);
  EXPECT_EQ(l[1].second, "13.0");
  EXPECT_EQ(l[2].second, "9.19.0");
  EXPECT_EQ(l[3].second, "2.28.9");
  EXPECT_EQ(l[5].second, "580.65.06");
}

// The query against what the venv's Python torch reports about the same wheels.
TEST(Versions, QueryMatchesVenvTorch) {
  const LibraryVersions v = QueryLibraryVersions();
  EXPECT_TRUE(IsDotted(v.torch)) << v.torch;
  EXPECT_FALSE(v.mpi.empty());
  EXPECT_EQ(v.mpi.find('\n'), std::string::npos) << v.mpi;
  EXPECT_TRUE(std::regex_match(v.mpi_standard, std::regex(R"(\d+\.\d+)"))) << v.mpi_standard;
  EXPECT_TRUE(v.cuda_driver.empty() || std::regex_match(v.cuda_driver, std::regex(R"(\d+\.\d+)")))
      << v.cuda_driver;
#ifdef RINGPILOT_WITH_CUDA
  EXPECT_FALSE(v.cuda_compiled.empty());
  EXPECT_FALSE(v.cuda_runtime.empty());
  EXPECT_TRUE(IsDotted(v.nccl_compiled)) << v.nccl_compiled;
  EXPECT_TRUE(IsDotted(v.nccl_loaded)) << v.nccl_loaded;
  EXPECT_NE(v.nccl_path.find("libnccl"), std::string::npos) << v.nccl_path;
#endif
  const std::string python = Env("RINGPILOT_SOURCE_DIR", ".") + "/.venv/bin/python";
  if (::access(python.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << python;
  const auto [out, rc] = Capture(
      "'" + python +
      "' -c 'import torch\n"
      "print(torch.__version__.split(\"+\")[0])\n"
      "print(torch.backends.cudnn.version() or 0 if torch.version.cuda else 0)\n"
      "print(\".\".join(map(str, torch.cuda.nccl.version())) if torch.version.cuda else \"\")'");
  ASSERT_EQ(rc, 0) << out;
  std::istringstream in(out);
  std::string torch, cudnn, nccl;
  std::getline(in, torch);
  std::getline(in, cudnn);
  std::getline(in, nccl);
  EXPECT_EQ(v.torch, torch);
#ifdef RINGPILOT_WITH_CUDA
  EXPECT_EQ(v.cudnn_loaded, CudnnVersionText(std::stol(cudnn)));
  EXPECT_EQ(v.nccl_loaded, nccl);
#endif
}

TEST(Versions, TrainerFlagPrintsTheSameObject) {
  const std::string trainer = Env("RINGPILOT_BUILD_DIR", "build") + "/bin/ringpilot-trainer";
  ASSERT_EQ(::access(trainer.c_str(), X_OK), 0) << trainer << ": build ringpilot-trainer";
  // No --config/--run-dir and no MPI_Init: the flag answers on its own.
  const auto [out, rc] = Capture("'" + trainer + "' --versions 2>/dev/null");
  EXPECT_EQ(rc, 0) << out;
  const auto doc = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(doc.is_object()) << out;
  const nlohmann::json expected = VersionsJson(QueryLibraryVersions());
  for (const auto& [key, value] : expected.items()) {
    ASSERT_TRUE(doc.contains(key)) << key << " missing in " << out;
    EXPECT_EQ(doc.at(key), value) << key;
  }
  EXPECT_EQ(doc.size(), expected.size()) << out;
}

}  // namespace
}  // namespace ringpilot::trainer::telemetry
