// trainer/run_plan.h: what the data decides, worked out once, the job left as loaded:
// train.epochs becomes optimizer steps (and the warm-up in steps), model.vocab_size 0
// becomes the shard's vocabulary, and an epoch count that makes no step is the job's
// error.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "base/files.h"
#include "data/token_shards.h"
#include "trainer/input/dataset_factory.h"
#include "trainer/options.h"
#include "trainer/run_plan.h"

namespace ringpilot::trainer {
namespace {

class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = "/tmp/ringpilot-run-plan-XXXXXX";
    path_ = ::mkdtemp(pattern.data()) ? pattern : "";
  }
  ~ScratchDir() { base::RemoveTree(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A token shard of 1200 ids packing to 18 sequences of 16 (40 documents of 6 tokens).
config::JobConfig TokensJob(const std::string& dir) {
  data::TokenShardWriter w(dir + "/train", {1200, 5, 6, 7, 0});
  for (int d = 0; d < 40; ++d) w.AddDocument({1000 + d, 1001, 1002, 1003, 1004, 1005});
  w.Finish();
  config::JobConfig job;
  job.source = dir + "/job.yaml";
  job.model.name = config::ModelName::kBertTiny;
  job.model.seq_len = 16;
  job.data.kind = config::DataKind::kTokens;
  job.data.train = dir + "/train";
  job.data.batch_per_rank = 2;
  job.world.procs_per_node = 2;
  return job;
}

TEST(RunPlan, StepsAndVocabularyComeFromTheData) {
  ScratchDir dir;
  config::JobConfig job = TokensJob(dir.path());
  job.train.steps = 7;
  const auto data = input::OpenDataset(InputOptionsFor(job), 0, 2);
  RunPlan plan = MakeRunPlan(job, *data);
  EXPECT_EQ(plan.data.samples, 18);
  EXPECT_EQ(plan.data_line, "data.train: 18 samples in 1 file");
  EXPECT_EQ(plan.steps_per_epoch, 4);  // 18 / (2 ranks x 2)
  EXPECT_EQ(plan.steps, 7);            // train.steps: no epochs
  EXPECT_EQ(plan.batches, 7);
  EXPECT_EQ(plan.epochs_line, "");
  ASSERT_TRUE(plan.tokens);
  EXPECT_EQ(plan.tokens->vocab, 1200);  // model.vocab_size 0: the shard's
  EXPECT_EQ(job.model.vocab_size, 0);   // the job as loaded
  EXPECT_EQ(ModelOptionsFor(job, plan.tokens).vocab_size, 1200);

  // train.epochs: epochs x batches per epoch / micro-batches, whatever train.steps says.
  job.train.epochs = 6;
  job.train.grad_accum_steps = 2;
  job.train.lr_warmup_epochs = 1;
  plan = MakeRunPlan(job, *data);
  EXPECT_EQ(plan.steps, 12);  // 6 x 4 / 2
  EXPECT_EQ(plan.batches, 24);
  EXPECT_EQ(plan.warmup_steps, 2);  // one epoch of six
  EXPECT_EQ(plan.epochs_line, "train.epochs 6: 4 batches per epoch, 12 steps, warm-up 2 steps");
  EXPECT_EQ(job.train.steps, 7);
  EXPECT_EQ(LrScheduleOptionsFor(job, plan.steps).total_steps, 12);
  EXPECT_NO_THROW(CheckRunPlan(job, plan));

  job.model.vocab_size = 1280;  // more rows than ids
  EXPECT_EQ(MakeRunPlan(job, *input::OpenDataset(InputOptionsFor(job), 0, 2)).tokens->vocab, 1280);
}

TEST(RunPlan, EpochsThatMakeNoStepAreTheJobsError) {
  ScratchDir dir;
  config::JobConfig job = TokensJob(dir.path());
  job.train.epochs = 1;
  job.train.grad_accum_steps = 5;  // 4 batches per epoch: no optimizer step
  const RunPlan plan = MakeRunPlan(job, *input::OpenDataset(InputOptionsFor(job), 0, 2));
  EXPECT_EQ(plan.steps, 0);
  try {
    CheckRunPlan(job, plan);
    ADD_FAILURE() << "no error";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), job.source +
                                         ": train.epochs 1 makes 0 optimizer step(s), none "
                                         "(train.grad_accum_steps 5)");
  }
  job.train.grad_accum_steps = 4;  // one optimizer step, and it would be warm-up
  job.train.lr_warmup_epochs = 0.5;
  const RunPlan all_warmup = MakeRunPlan(job, *input::OpenDataset(InputOptionsFor(job), 0, 2));
  EXPECT_EQ(all_warmup.steps, 1);
  EXPECT_EQ(all_warmup.warmup_steps, 1);
  EXPECT_THROW(CheckRunPlan(job, all_warmup), config::ConfigError);
}

TEST(RunPlan, SyntheticHasNoEpochsAndBertsVocabulary) {
  config::JobConfig job;
  job.train.steps = 9;
  const RunPlan images = MakeRunPlan(job, *input::OpenDataset(InputOptionsFor(job), 0, 1));
  EXPECT_EQ(images.steps, 9);
  EXPECT_EQ(images.steps_per_epoch, 0);
  EXPECT_EQ(images.data_line, "");
  EXPECT_FALSE(images.tokens);
  job.model.name = config::ModelName::kBertTiny;
  const RunPlan tokens = MakeRunPlan(job, *input::OpenDataset(InputOptionsFor(job), 0, 1));
  ASSERT_TRUE(tokens.tokens);
  EXPECT_EQ(tokens.tokens->vocab, config::kSyntheticVocabSize);
}

}  // namespace
}  // namespace ringpilot::trainer
