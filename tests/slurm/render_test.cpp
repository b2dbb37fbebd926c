// The sbatch script of `ringpilot slurm render`: directives, quoting, requeue layout.
#include "slurm/render.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace ringpilot::slurm {
namespace {

SbatchSpec Spec() {
  SbatchSpec s;
  s.job_name = "demo";
  s.nodes = 2;
  s.tasks_per_node = 4;
  s.gpus_per_node = 4;
  s.time = "02:00:00";
  s.signal_seconds = 600;
  s.run_root = "/scratch/runs";
  s.ringpilot = "/opt/ringpilot/bin/ringpilot";
  s.job_yaml = "name: \"demo\"\nmodel:\n  name: resnet50\n";
  return s;
}

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(SlurmRender, Directives) {
  const std::string s = RenderSbatch(Spec());
  EXPECT_EQ(s.rfind("#!/bin/bash\n", 0), 0u);
  EXPECT_TRUE(Has(s, "#SBATCH --job-name=demo"));
  EXPECT_TRUE(Has(s, "#SBATCH --nodes=2"));
  EXPECT_TRUE(Has(s, "#SBATCH --ntasks-per-node=4"));
  EXPECT_TRUE(Has(s, "#SBATCH --gpus-per-node=4"));
  EXPECT_EQ(s.find("--gpus-per-task"), std::string::npos);
  EXPECT_TRUE(Has(s, "#SBATCH --time=02:00:00"));
  EXPECT_TRUE(Has(s, "#SBATCH --requeue"));
  EXPECT_TRUE(Has(s, "#SBATCH --signal=B:USR1@600"));
  EXPECT_TRUE(Has(s, "#SBATCH --output=/scratch/runs/demo-%j.out"));
  EXPECT_EQ(s.find("--partition"), std::string::npos);
  EXPECT_EQ(s.find("--account"), std::string::npos);
  EXPECT_EQ(s.find("--qos"), std::string::npos);
}

TEST(SlurmRender, OptionalDirectivesAndCpu) {
  SbatchSpec spec = Spec();
  spec.gpus_per_node = 0;
  spec.partition = "gpu";
  spec.account = "proj-42";
  spec.qos = "high";
  const std::string s = RenderSbatch(spec);
  EXPECT_EQ(s.find("--gpus"), std::string::npos);
  EXPECT_TRUE(Has(s, "#SBATCH --partition=gpu"));
  EXPECT_TRUE(Has(s, "#SBATCH --account=proj-42"));
  EXPECT_TRUE(Has(s, "#SBATCH --qos=high"));
}

TEST(SlurmRender, RunDirIsStableAcrossRequeue) {
  const std::string s = RenderSbatch(Spec());
  EXPECT_TRUE(Has(s, "run_dir=\"${run_root}/${job_name}-${SLURM_JOB_ID}\""));
  EXPECT_NE(s.find("--run-dir \"$run_dir\""), std::string::npos);
  EXPECT_TRUE(Has(s, "trap on_usr1 USR1"));
  EXPECT_NE(s.find("scontrol requeue \"$SLURM_JOB_ID\""), std::string::npos);
}

TEST(SlurmRender, BackendSlurmAndUsr1ForwardedBeforeRequeue) {
  const std::string s = RenderSbatch(Spec());
  // ringpilot run finds the allocation's hosts itself.
  EXPECT_NE(s.find("--run-dir \"$run_dir\" --set launch.backend=slurm &\n"), std::string::npos);
  EXPECT_EQ(s.find("scontrol show hostnames"), std::string::npos);
  EXPECT_EQ(s.find("launch.hosts"), std::string::npos);
  // USR1 goes to ringpilot run; the job is requeued only after it exits preempted.
  EXPECT_NE(s.find("kill -USR1 \"$pid\""), std::string::npos);
  EXPECT_TRUE(Has(s, "preempted_status=" + std::to_string(kRunPreemptedStatus)));
  const size_t requeue = s.find("scontrol requeue");
  ASSERT_NE(requeue, std::string::npos);
  EXPECT_LT(s.find("if ((status == preempted_status)); then"), requeue);
  EXPECT_LT(s.find("\"$ringpilot\" run"), requeue);
}

TEST(SlurmRender, JobFileIsAQuotedHeredoc) {
  SbatchSpec spec = Spec();
  spec.job_yaml = "name: \"demo\"\nnote: \"$(rm -rf /) `id` $HOME\"\n";
  const std::string s = RenderSbatch(spec);
  EXPECT_NE(s.find("<<'RINGPILOT_JOB_EOF'\n" + spec.job_yaml + "RINGPILOT_JOB_EOF\n"),
            std::string::npos);
  spec.job_yaml = "a: 1\nRINGPILOT_JOB_EOF\n";
  EXPECT_THROW(RenderSbatch(spec), std::invalid_argument);
}

TEST(SlurmRender, ValuesAreSingleQuoted) {
  const std::string s = RenderSbatch(Spec());
  EXPECT_TRUE(Has(s, "ringpilot='/opt/ringpilot/bin/ringpilot'"));
  EXPECT_TRUE(Has(s, "run_root='/scratch/runs'"));
  EXPECT_EQ(ShellSingleQuote("it's"), "'it'\\''s'");
}

TEST(SlurmRender, RejectsUnsafeValues) {
  for (auto mutate : std::initializer_list<void (*)(SbatchSpec&)>{
           [](SbatchSpec& s) { s.job_name = "a;b"; },
           [](SbatchSpec& s) { s.partition = "gpu\n#SBATCH --uid=0"; },
           [](SbatchSpec& s) { s.account = "$(id)"; },
           [](SbatchSpec& s) { s.run_root = "/tmp/a b"; },
           [](SbatchSpec& s) { s.run_root = "-x"; },
           [](SbatchSpec& s) { s.ringpilot = "ringpilot'x"; },
           [](SbatchSpec& s) { s.time = "2h"; },
           [](SbatchSpec& s) { s.signal_seconds = 0; },
       }) {
    SbatchSpec spec = Spec();
    mutate(spec);
    EXPECT_THROW(RenderSbatch(spec), std::invalid_argument);
  }
}

TEST(SlurmRender, TimeFormats) {
  for (const char* ok : {"30", "30:00", "02:00:00", "1-00", "1-12:30", "2-00:00:00", "UNLIMITED"}) {
    EXPECT_EQ(CheckTime(ok), "") << ok;
  }
  for (const char* bad : {"", "0", "00:00:00", "1:2:3:4", "a", "1-", "-1", "1-2-3", "12:3x"}) {
    EXPECT_NE(CheckTime(bad), "") << bad;
  }
}

}  // namespace
}  // namespace ringpilot::slurm
