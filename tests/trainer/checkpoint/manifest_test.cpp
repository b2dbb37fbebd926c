// trainer/checkpoint/manifest.h without LibTorch: writing a manifest and verifying a
// checkpoint directory against it, and the manifests a corrupt or hostile directory may
// hold (each must end in CheckpointError, which resume and export skip or report).
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "trainer/checkpoint/manifest.h"
#include "trainer/checkpoint/sha256.h"

namespace ringpilot::trainer::checkpoint {
namespace {

class ManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = testing::TempDir() + "/manifest-" + std::to_string(::getpid()) + "-" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name();
    base::RemoveTree(dir);
    base::MakeDirs(dir);
    std::ofstream(dir + "/" + kStateFile) << "state bytes\n";
    base::WriteFileAtomically(dir + "/" + kManifestFile,
                              ManifestJson(dir, {kStateFile}, 20, 4, "name: t\n"));
  }
  void TearDown() override { base::RemoveTree(dir); }

  nlohmann::json Manifest() const {
    return nlohmann::json::parse(base::ReadFile(dir + "/" + kManifestFile));
  }
  void WriteJson(const nlohmann::json& m) const { Write(m.dump()); }
  void Write(const std::string& text) const {
    base::WriteFileAtomically(dir + "/" + kManifestFile, text);
  }
  // The problem VerifyCheckpointDir reports, or "" when it verifies.
  std::string Problem() const {
    try {
      VerifyCheckpointDir(dir);
      return "";
    } catch (const CheckpointError& e) {
      return e.what();
    }
  }

  std::string dir;
};

TEST_F(ManifestTest, WrittenManifestVerifies) {
  const nlohmann::json m = Manifest();
  EXPECT_EQ(m["format"], kCheckpointFormat);
  EXPECT_EQ(m["files"][kStateFile]["bytes"], 12);
  EXPECT_EQ(m["files"][kStateFile]["sha256_chunks"][0], Sha256File(dir + "/" + kStateFile));
  const CheckpointInfo info = VerifyCheckpointDir(dir);
  EXPECT_EQ(info.step, 20);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.path, dir);
}

TEST_F(ManifestTest, ChangedTruncatedOrMissingFilesAreNamed) {
  std::ofstream(dir + "/" + kStateFile) << "state byteZ\n";
  EXPECT_NE(Problem().find(dir + "/state.pt: SHA-256 differs"), std::string::npos) << Problem();
  std::ofstream(dir + "/" + kStateFile) << "short";
  EXPECT_NE(Problem().find("size differs"), std::string::npos) << Problem();
  base::RemoveTree(dir + "/" + kStateFile);
  EXPECT_NE(Problem().find(dir + "/state.pt: missing"), std::string::npos) << Problem();
}

TEST_F(ManifestTest, NotAManifest) {
  Write("{\"format\": \"ringpilot-checkpoint-v1\", ");
  EXPECT_NE(Problem().find("not valid JSON"), std::string::npos) << Problem();
  Write("[1, 2]");
  EXPECT_NE(Problem().find("not a ringpilot-checkpoint-v1 manifest"), std::string::npos);
  base::RemoveTree(dir + "/" + kManifestFile);
  EXPECT_NE(Problem().find("manifest.json: missing or unreadable"), std::string::npos);
}

// Found by tests/fuzz/checkpoint_manifest_fuzzer (corpus/checkpoint_manifest/
// regression-type-error): a field of another JSON type escaped as nlohmann's type_error,
// which resume does not catch, so a rank died on a corrupt newest checkpoint instead of
// falling back to the one before.
TEST_F(ManifestTest, FieldsOfTheWrongTypeAreCorruptNotACrash) {
  const nlohmann::json good = Manifest();
  const auto problem_with = [&](const std::string& pointer, const nlohmann::json& value) {
    nlohmann::json m = good;
    m[nlohmann::json::json_pointer(pointer)] = value;
    WriteJson(m);
    return Problem();
  };
  EXPECT_NE(problem_with("/format", 1).find("not a ringpilot-checkpoint-v1 manifest"),
            std::string::npos);
  EXPECT_NE(problem_with("/step", "10").find("\"step\" is not a step number"), std::string::npos);
  EXPECT_NE(problem_with("/step", -1).find("\"step\" is not a step number"), std::string::npos);
  EXPECT_NE(problem_with("/world_size", "2").find("\"world_size\" is not a rank count"),
            std::string::npos);
  EXPECT_NE(problem_with("/files", nlohmann::json::array()).find("does not list state.pt"),
            std::string::npos);
  EXPECT_NE(problem_with("/files/state.pt/bytes", true).find("size differs"), std::string::npos);
  EXPECT_NE(problem_with("/files/state.pt/sha256_chunk_bytes", "64").find("SHA-256 differs"),
            std::string::npos);
  EXPECT_NE(problem_with("/files/state.pt/sha256_chunks", 5).find("SHA-256 differs"),
            std::string::npos);
  EXPECT_NE(problem_with("/files/state.pt", "x").find("size differs"), std::string::npos);
  nlohmann::json legacy = good;
  legacy["files"][kStateFile].erase("sha256_chunks");
  legacy["files"][kStateFile]["sha256"] = 7;
  WriteJson(legacy);
  EXPECT_NE(Problem().find("SHA-256 differs"), std::string::npos) << Problem();
}

// A manifest names files of its own directory only, and a chunk size so large that the
// piece count wraps around to none must not verify an unread file.
TEST_F(ManifestTest, NamesOutsideTheDirectoryAndWrappingChunkSizesAreRejected) {
  const nlohmann::json good = Manifest();
  for (const std::string name : {"", ".", "..", "../manifest-other/state.pt", "sub/x"}) {
    nlohmann::json m = good;
    m["files"][name] = m["files"][kStateFile];
    WriteJson(m);
    EXPECT_NE(Problem().find("is not a name in the checkpoint directory"), std::string::npos)
        << "'" << name << "': " << Problem();
  }
  nlohmann::json m = good;
  m["files"][kStateFile]["sha256_chunk_bytes"] = UINT64_MAX;
  m["files"][kStateFile]["sha256_chunks"] = nlohmann::json::array();
  WriteJson(m);
  EXPECT_NE(Problem().find("SHA-256 differs"), std::string::npos) << Problem();
}

}  // namespace
}  // namespace ringpilot::trainer::checkpoint
