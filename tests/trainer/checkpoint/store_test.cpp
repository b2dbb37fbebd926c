#include <unistd.h>

#include <ctime>
#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "trainer/checkpoint/sha256.h"
#include "trainer/checkpoint/store.h"

namespace ringpilot::trainer::checkpoint {
namespace {

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = testing::TempDir() + "/ckpt-" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name();
    base::RemoveTree(dir);
  }
  std::vector<NamedTensor> State(float v) {
    return {{"model/w", at::full({3, 4}, v)},
            {"optimizer/m", at::full({5}, v * 2)},
            {"rng/cpu", at::full({2, 8}, static_cast<int64_t>(v), at::kByte)}};
  }
  std::string dir;
};

TEST_F(CheckpointTest, SaveVerifyLoadRoundTrip) {
  CheckpointStore store(dir, 3);
  auto info = store.Save(10, 2, "job", State(1.5f));
  EXPECT_EQ(info.path, dir + "/step-00000010");
  EXPECT_TRUE(base::Exists(info.path + "/state.pt"));
  EXPECT_TRUE(base::Exists(info.path + "/manifest.json"));
  auto found = store.FindNewestValid(nullptr);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->step, 10);
  EXPECT_EQ(found->world_size, 2);
  auto into = State(0.f);
  store.Load(*found, into);
  EXPECT_TRUE(at::equal(into[0].tensor, at::full({3, 4}, 1.5f)));
  EXPECT_TRUE(at::equal(into[1].tensor, at::full({5}, 3.f)));
  EXPECT_TRUE(at::equal(into[2].tensor, at::full({2, 8}, 1, at::kByte)));
  // No temporary directory is left behind.
  for (auto& name : base::ListDir(dir)) EXPECT_EQ(name.rfind(".tmp", 0), std::string::npos) << name;
}

TEST_F(CheckpointTest, KeepsOnlyTheNewest) {
  CheckpointStore store(dir, 2);
  for (int s : {5, 10, 15}) store.Save(s, 1, "job", State(s));
  EXPECT_FALSE(base::Exists(dir + "/step-00000005"));
  EXPECT_TRUE(base::Exists(dir + "/step-00000010"));
  EXPECT_TRUE(base::Exists(dir + "/step-00000015"));
}

// Checkpoints of earlier releases carry one whole-file "sha256" instead of per-piece digests.
TEST_F(CheckpointTest, WholeFileSha256ManifestsStillVerify) {
  CheckpointStore store(dir, 3);
  const auto info = store.Save(7, 1, "job", State(7));
  const std::string manifest = info.path + "/manifest.json";
  nlohmann::json m = nlohmann::json::parse(std::ifstream(manifest));
  auto& meta = m["files"]["state.pt"];
  ASSERT_TRUE(meta.contains("sha256_chunks"));
  meta.erase("sha256_chunks");
  meta.erase("sha256_chunk_bytes");
  meta["sha256"] = Sha256File(info.path + "/state.pt");
  std::ofstream(manifest, std::ios::trunc) << m.dump(2);
  EXPECT_EQ(CheckpointStore::Verify(info.path).step, 7);
  meta["sha256"] = std::string(64, '0');
  std::ofstream(manifest, std::ios::trunc) << m.dump(2);
  EXPECT_THROW(CheckpointStore::Verify(info.path), CheckpointError);
}

// A newest manifest whose fields have the wrong JSON type is corrupt like any other: resume
// takes the checkpoint before it (it used to throw nlohmann's type_error out of
// FindNewestValid; found by tests/fuzz/checkpoint_manifest_fuzzer).
TEST_F(CheckpointTest, ManifestOfTheWrongTypesFallsBackToOlder) {
  CheckpointStore store(dir, 3);
  store.Save(5, 1, "job", State(5));
  const auto newest = store.Save(10, 1, "job", State(10));
  nlohmann::json m = nlohmann::json::parse(std::ifstream(newest.path + "/manifest.json"));
  m["world_size"] = "one";
  std::ofstream(newest.path + "/manifest.json", std::ios::trunc) << m.dump();
  std::vector<std::string> warnings;
  const auto found = store.FindNewestValid(&warnings);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->step, 5);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("\"world_size\" is not a rank count"), std::string::npos)
      << warnings[0];
}

TEST_F(CheckpointTest, CorruptNewestFallsBackToOlderAndIsKept) {
  CheckpointStore store(dir, 3);
  store.Save(5, 1, "job", State(5));
  store.Save(10, 1, "job", State(10));
  {
    std::fstream f(dir + "/step-00000010/state.pt",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
    f.put('\xa5');
  }
  std::vector<std::string> warnings;
  auto found = store.FindNewestValid(&warnings);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->step, 5);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("step-00000010/state.pt"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("SHA-256"), std::string::npos) << warnings[0];
  // Nothing deleted: the corrupt checkpoint is moved aside under a non-step name.
  EXPECT_FALSE(base::Exists(dir + "/step-00000010"));
  int aside = 0;
  for (const auto& n : base::ListDir(dir)) {
    if (n.rfind("corrupt-step-00000010-", 0) == 0 && base::Exists(dir + "/" + n + "/state.pt"))
      ++aside;
  }
  EXPECT_EQ(aside, 1);
  EXPECT_NE(warnings[0].find("moved to"), std::string::npos) << warnings[0];
}

TEST_F(CheckpointTest, TidyRemovesStaleTempsAndKeepsTheNewestCorrupt) {
  CheckpointStore store(dir, 2);
  store.Save(4, 1, "job", State(1.0f));
  base::MakeDirs(dir + "/.tmp-step-00000006-77");  // an earlier attempt's
  base::MakeDirs(dir + "/.tmp-step-00000006-77.old");
  for (const char* name :
       {"corrupt-step-00000003-300", "corrupt-step-00000001-100", "corrupt-step-00000002-200"}) {
    base::MakeDirs(dir + "/" + name);
  }
  // Started after the temps were made: they are earlier attempts' and go.
  const double start = static_cast<double>(::time(nullptr)) + 5;
  const std::vector<std::string> lines = store.Tidy(start);
  const std::vector<std::string> want = {
      "removed " + dir + "/.tmp-step-00000006-77 (an unfinished save of an earlier attempt)",
      "removed " + dir + "/.tmp-step-00000006-77.old (an unfinished save of an earlier attempt)",
      "removed " + dir +
          "/corrupt-step-00000001-100 (a corrupt checkpoint; checkpoint.keep 2 newer ones are "
          "kept)",
      "kept " + dir +
          "/corrupt-step-00000002-200 (a corrupt checkpoint set aside; delete it once "
          "looked at)",
      "kept " + dir +
          "/corrupt-step-00000003-300 (a corrupt checkpoint set aside; delete it once "
          "looked at)"};
  EXPECT_EQ(lines, want);
  EXPECT_EQ(base::ListDir(dir),
            (std::vector<std::string>{"corrupt-step-00000002-200", "corrupt-step-00000003-300",
                                      "step-00000004"}));
  // A temp of the running attempt (newer than its start) stays.
  base::MakeDirs(dir + "/.tmp-step-00000008-78");
  EXPECT_EQ(store.Tidy(start - 3600).size(), 2u);
  EXPECT_TRUE(base::Exists(dir + "/.tmp-step-00000008-78"));
}

TEST_F(CheckpointTest, TruncatedAndMissingManifestAreRejected) {
  CheckpointStore store(dir, 3);
  store.Save(5, 1, "job", State(5));
  ASSERT_EQ(::truncate((dir + "/step-00000005/state.pt").c_str(), 10), 0);
  EXPECT_THROW(CheckpointStore::Verify(dir + "/step-00000005"), CheckpointError);
  ::unlink((dir + "/step-00000005/manifest.json").c_str());
  try {
    CheckpointStore::Verify(dir + "/step-00000005");
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("manifest.json"), std::string::npos);
  }
  EXPECT_FALSE(store.FindNewestValid(nullptr));
}

TEST_F(CheckpointTest, LoadChecksNamesAndShapes) {
  CheckpointStore store(dir, 3);
  auto info = store.Save(1, 1, "job", State(1));
  std::vector<NamedTensor> wrong_shape = {{"model/w", at::zeros({4, 3})}};
  EXPECT_THROW(store.Load(info, wrong_shape), CheckpointError);
  std::vector<NamedTensor> missing = {{"model/other", at::zeros({1})}};
  EXPECT_THROW(store.Load(info, missing), CheckpointError);
}

TEST_F(CheckpointTest, AnOptionalTensorTheCheckpointLacksIsLeftAndNamed) {
  CheckpointStore store(dir, 3);
  auto info = store.Save(1, 1, "job", State(4));
  auto into = State(0);
  const at::Tensor extra = at::full({2}, 9.f);
  into.push_back({"rng/new", extra, /*optional=*/true});
  const std::vector<std::string> absent = store.Load(info, into);
  EXPECT_EQ(absent, std::vector<std::string>{"rng/new"});
  EXPECT_TRUE(at::equal(extra, at::full({2}, 9.f)));
  EXPECT_TRUE(at::equal(into[0].tensor, at::full({3, 4}, 4.f)));  // the others still load
}

TEST_F(CheckpointTest, SameStepAgainReplacesWhole) {
  CheckpointStore store(dir, 3);
  store.Save(7, 1, "job", State(1));
  auto info = store.Save(7, 1, "job", State(2));
  auto into = State(0);
  store.Load(info, into);
  EXPECT_TRUE(at::equal(into[0].tensor, at::full({3, 4}, 2.f)));
}

}  // namespace
}  // namespace ringpilot::trainer::checkpoint
