// Every problem of a job in one pass, renamed keys, the backend a render implies, and the
// keys of the renders (slurm.directives, slurm.setup, k8s.*_per_rank).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config/job.h"

namespace ringpilot::config {
namespace {

constexpr const char* kMinimal = "name: t\nmodel: {name: resnet18-cifar}\n";

// The lines of the ConfigError that parsing `text` throws; empty when it is accepted.
std::vector<std::string> Problems(const std::string& text,
                                  const std::vector<std::string>& overrides = {}) {
  try {
    ParseJobConfig(text, "f.yaml", overrides);
  } catch (const ConfigError& e) {
    return e.lines();
  }
  return {};
}

TEST(JobErrors, EveryKeyProblemInOnePass) {
  const std::vector<std::string> lines = Problems(
      "name: t\n"
      "model: {name: resnet18-cifar}\n"
      "train:\n"
      "  stpes: 5\n"
      "  lr: -1\n"
      "comm: {bucket_mb: 0}\n"
      "metrics: {bind: 'a b'}\n",
      {"train.steps=abc", "world.nodes=2"});
  ASSERT_EQ(lines.size(), 6u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0], "f.yaml:4:3: train.stpes: unknown key (did you mean train.steps?)");
  EXPECT_EQ(lines[1].rfind("f.yaml:5:7: train.lr: must be in (0, 100], got -1", 0), 0u);
  EXPECT_EQ(lines[2].rfind("f.yaml:6:19: comm.bucket_mb: must be in (0, 4096]", 0), 0u);
  EXPECT_EQ(
      lines[3].rfind("f.yaml:7:17: metrics.bind: must be auto, an IPv4 address or a host name", 0),
      0u);
  EXPECT_EQ(lines[4].rfind("--set[1]:1:13: train.steps: expected an integer", 0), 0u);
  // The cross-key rule of the good override still runs.
  EXPECT_EQ(lines[5].rfind("--set[2]:1:13: world.nodes: launch.backend local runs on one node", 0),
            0u);
  // what() is the same lines, one per line.
  try {
    ParseJobConfig("name: t\nmodel: {name: x}\ntrain: {steps: 0}\n", "g.yaml");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), e.lines()[0] + "\n" + e.lines()[1]);
    EXPECT_EQ(e.lines().size(), 2u);
  }
}

TEST(JobErrors, CrossKeyRulesSkipRejectedKeys) {
  // comm.first_bucket_mb is bad, so "first <= bucket" is not judged on its default.
  const std::vector<std::string> lines =
      Problems(std::string(kMinimal) + "comm: {first_bucket_mb: x, bucket_mb: 0.5}\n");
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_NE(lines[0].find("comm.first_bucket_mb: expected a number"), std::string::npos);
  // A section that is not a mapping: its keys' rules are skipped too.
  const std::vector<std::string> section =
      Problems(std::string(kMinimal) + "launch: mpi\nworld: {nodes: 2}\n");
  ASSERT_EQ(section.size(), 1u) << ::testing::PrintToString(section);
  EXPECT_NE(section[0].find("launch: expected a mapping"), std::string::npos);
}

TEST(JobErrors, MissingRequiredKeysAndBadValuesTogether) {
  const std::vector<std::string> lines = Problems("world: {procs_per_node: 0}\n");
  ASSERT_EQ(lines.size(), 3u) << ::testing::PrintToString(lines);
  EXPECT_NE(lines[0].find("world.procs_per_node: must be in 1..1024"), std::string::npos);
  EXPECT_NE(lines[1].find(": name: required key missing"), std::string::npos);
  EXPECT_NE(lines[2].find(": model.name: required key missing"), std::string::npos);
}

TEST(JobErrors, SyntaxErrorsStayAlone) {
  const std::vector<std::string> lines = Problems("name: [\nmodel: {name: x}\n");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("<yaml>"), std::string::npos);
}

TEST(JobErrors, RenamedKeyNamesItsSuccessor) {
  const std::vector<std::string> lines =
      Problems(std::string(kMinimal) + "train: {warmup_steps: 5}\n");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "f.yaml:3:9: train.warmup_steps: renamed to train.timing_skip_steps (steps left out "
            "of the throughput figures; the learning-rate warm-up is train.lr_warmup_steps)");
  const std::vector<std::string> set = Problems(kMinimal, {"train.warmup_steps=5"});
  ASSERT_EQ(set.size(), 1u);
  EXPECT_NE(set[0].find("--set[1]:1:1: train.warmup_steps: renamed to train.timing_skip_steps"),
            std::string::npos);
  EXPECT_EQ(ParseJobConfig(std::string(kMinimal) + "train: {timing_skip_steps: 5}\n", "f.yaml")
                .train.timing_skip_steps,
            5);
}

TEST(JobErrors, RenderKeys) {
  const JobConfig c =
      ParseJobConfig(std::string(kMinimal) +
                         "slurm:\n"
                         "  directives: [\"--constraint=h100&ib\", \"--exclusive\", \"--mem=0\"]\n"
                         "  setup: [\"module load cuda/13\", \"source /opt/venv/bin/activate\"]\n"
                         "k8s: {cpu_per_rank: 1500m, memory_per_rank: 8Gi}\n",
                     "f.yaml");
  EXPECT_EQ(c.slurm.directives,
            (std::vector<std::string>{"--constraint=h100&ib", "--exclusive", "--mem=0"}));
  EXPECT_EQ(c.slurm.setup.size(), 2u);
  EXPECT_EQ(c.k8s.cpu_per_rank, "1500m");
  EXPECT_EQ(c.k8s.memory_per_rank, "8Gi");
  // Round trip through the emitted job.
  const JobConfig again = ParseJobConfig(EmitJobConfig(c), "emitted");
  EXPECT_EQ(again.slurm.directives, c.slurm.directives);
  EXPECT_EQ(again.slurm.setup, c.slurm.setup);

  const std::vector<std::string> bad =
      Problems(std::string(kMinimal) +
               "slurm: {directives: [\"--exclusive\", \"-C h100\", \"--time=10\"], setup: [\"\"]}\n"
               "k8s: {cpu_per_rank: lots}\n");
  ASSERT_EQ(bad.size(), 3u) << ::testing::PrintToString(bad);
  EXPECT_NE(bad[0].find("f.yaml:3:37: slurm.directives: must be --option or --option=value"),
            std::string::npos);
  // The list stops at its first bad item: one line per key.
  EXPECT_NE(bad[1].find("slurm.setup: must be one shell line"), std::string::npos);
  EXPECT_NE(bad[2].find("k8s.cpu_per_rank: must be a quantity"), std::string::npos);
  const std::vector<std::string> rendered =
      Problems(kMinimal, {"slurm.directives=[\"--time=10\"]"});
  ASSERT_EQ(rendered.size(), 1u);
  EXPECT_NE(rendered[0].find("--time is rendered from slurm.time; set that instead"),
            std::string::npos);
}

TEST(JobErrors, RenderImpliesItsBackend) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/two-nodes.yaml";
  {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("name: t\nmodel: {name: resnet18-cifar}\nworld: {nodes: 2}\n", f);
    std::fclose(f);
  }
  // Plain loading: two nodes need a multi-node backend.
  EXPECT_THROW(LoadJobConfig(path), ConfigError);
  EXPECT_EQ(LoadJobConfigFor(Backend::kSlurm, path).launch.backend, Backend::kSlurm);
  EXPECT_EQ(LoadJobConfigFor(Backend::kK8s, path).launch.backend, Backend::kK8s);
  // A file's own backend is replaced (the file is portable); an override that says
  // otherwise is an error at the override.
  EXPECT_EQ(LoadJobConfigFor(Backend::kSlurm, path, {"launch.backend=slurm"}).launch.backend,
            Backend::kSlurm);
  try {
    LoadJobConfigFor(Backend::kSlurm, path, {"launch.backend=mpi"});
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.lines().size(), 1u) << e.what();
    EXPECT_EQ(e.lines()[0],
              "--set[1]:1:16: launch.backend: 'ringpilot slurm' runs the job with launch.backend "
              "slurm, not mpi (leave the override out)");
  }
  std::remove(path.c_str());
}

TEST(JobErrors, ManyProblemsAreCountedAfterTwenty) {
  // 100,000 unknown keys made 100,000 lines, each with the list of known keys: now 20 lines,
  // then how many more; the known keys of a section are listed once.
  std::string text = std::string(kMinimal) + "train:\n";
  for (int i = 0; i < 5000; ++i) text += "  zz" + std::to_string(i) + "x: 1\n";
  const std::vector<std::string> lines = Problems(text);
  ASSERT_EQ(lines.size(), 21u);
  EXPECT_EQ(lines[20], "... and 4980 more");
  EXPECT_EQ(lines[0].rfind("f.yaml:4:3: train.zz0x: unknown key (known: steps, ", 0), 0u)
      << lines[0];
  EXPECT_EQ(lines[1],
            "f.yaml:5:3: train.zz1x: unknown key (the known train.* keys are listed above)");
  std::size_t lists = 0;
  for (const std::string& line : lines) lists += line.find("(known: ") != std::string::npos;
  EXPECT_EQ(lists, 1u);
  // Exactly 20: no "more" line.
  std::string twenty = std::string(kMinimal) + "train:\n";
  for (int i = 0; i < 20; ++i) twenty += "  zz" + std::to_string(i) + "x: 1\n";
  EXPECT_EQ(Problems(twenty).size(), 20u);
  // Overrides count with the file's problems.
  const std::vector<std::string> both = Problems(twenty, {"train.steps=x"});
  ASSERT_EQ(both.size(), 21u);
  EXPECT_EQ(both[20], "... and 1 more");
}

TEST(JobErrors, OverrideIsOneCompleteValue) {
  // Text after the value was dropped: `train={steps: 5} junk` set 5 steps.
  const std::vector<std::string> lines = Problems(kMinimal, {"train={steps: 5} junk"});
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0],
            "--set[1]:1:18: train: text after the value: an override is one YAML value (quote "
            "text meant as one string)");
  // The same text in a job file is rejected too.
  EXPECT_EQ(Problems("name: t\nmodel: {name: resnet18-cifar}\ntrain: {steps: 5} junk\n").size(),
            1u);
  const std::vector<std::string> scalar = Problems(kMinimal, {"train.steps=5\n---\n6"});
  ASSERT_EQ(scalar.size(), 1u);
  EXPECT_NE(scalar[0].find("--set[1]:1:"), std::string::npos);
  EXPECT_NE(scalar[0].find("train.steps: text after the value"), std::string::npos);
  // A plain scalar with spaces is one value; so is a whole section.
  EXPECT_EQ(
      ParseJobConfig(kMinimal, "f.yaml", {"data.kind=cifar", "data.train=/my data/x"}).data.train,
      "/my data/x");
  EXPECT_EQ(ParseJobConfig(kMinimal, "f.yaml", {"train={steps: 7}"}).train.steps, 7);
}

TEST(JobErrors, DepthPastTheParsersLimitIsNamed) {
  const std::vector<std::string> file =
      Problems("name: t\nmodel: {name: resnet18-cifar}\ntrain: " + std::string(5000, '['));
  ASSERT_EQ(file.size(), 1u);
  EXPECT_NE(file[0].find("f.yaml:3:"), std::string::npos) << file[0];
  EXPECT_NE(file[0].find(": <yaml>: nested deeper than "), std::string::npos) << file[0];
  EXPECT_NE(file[0].find(" levels"), std::string::npos) << file[0];
  const std::vector<std::string> set =
      Problems(kMinimal, {"train.steps=" + std::string(5000, '[')});
  ASSERT_EQ(set.size(), 1u);
  EXPECT_NE(set[0].find("--set[1]:1:"), std::string::npos) << set[0];
  EXPECT_NE(set[0].find("train.steps: cannot parse value as YAML: nested deeper than "),
            std::string::npos)
      << set[0];
}

}  // namespace
}  // namespace ringpilot::config
