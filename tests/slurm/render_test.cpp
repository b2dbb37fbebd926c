// The sbatch script of `ringpilot slurm render`: directives, quoting, requeue layout.
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "base/exit_status.h"
#include "config/job.h"
#include "slurm/render.h"

namespace ringpilot::slurm {
namespace {

constexpr const char* kSelf = "/opt/ringpilot/bin/ringpilot";

config::JobConfig Spec() {
  config::JobConfig s;
  s.name = "demo";
  s.model.name = config::ModelName::kResnet50;
  s.world.nodes = 2;
  s.world.procs_per_node = 4;
  s.world.device = config::Device::kCuda;
  s.slurm.time = "02:00:00";
  s.slurm.signal_seconds = 600;
  s.slurm.run_root = "/scratch/runs";
  return s;
}

std::string RenderSbatch(const config::JobConfig& job) { return slurm::RenderSbatch(job, kSelf); }

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
  config::JobConfig spec = Spec();
  spec.world.device = config::Device::kCpu;
  spec.slurm.partition = "gpu";
  spec.slurm.account = "proj-42";
  spec.slurm.qos = "high";
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
  config::JobConfig spec = Spec();
  spec.launch.backend = config::Backend::kMpi;  // the file's backend: replaced by slurm
  const std::string s = RenderSbatch(spec);
  // ringpilot run finds the allocation's hosts itself: the embedded job says backend slurm.
  EXPECT_NE(s.find("--run-dir \"$run_dir\" &\n"), std::string::npos);
  EXPECT_NE(s.find("launch:\n  backend: slurm\n"), std::string::npos);
  EXPECT_EQ(s.find("scontrol show hostnames"), std::string::npos);
  EXPECT_EQ(s.find("launch.hosts"), std::string::npos);
  // USR1 goes to ringpilot run; the job is requeued only after it exits preempted.
  EXPECT_NE(s.find("kill -USR1 \"$pid\""), std::string::npos);
  EXPECT_TRUE(Has(s, "preempted_status=" + std::to_string(base::kExitPreempted)));
  const size_t requeue = s.find("scontrol requeue");
  ASSERT_NE(requeue, std::string::npos);
  EXPECT_LT(s.find("if ((status == preempted_status)); then"), requeue);
  EXPECT_LT(s.find("\"$ringpilot\" run"), requeue);
}

TEST(SlurmRender, JobFileIsAQuotedHeredoc) {
  config::JobConfig spec = Spec();
  spec.slurm.partition = "p";  // any value: the whole resolved job file is embedded
  spec.launch.backend = config::Backend::kSlurm;
  spec.metrics.bind = "0.0.0.0";
  const std::string yaml = config::EmitJobConfig(spec);
  EXPECT_NE(RenderSbatch(spec).find("<<'RINGPILOT_JOB_EOF'\n" + yaml + "RINGPILOT_JOB_EOF\n"),
            std::string::npos);
  // Values that a shell would expand stay literal inside the quoted heredoc.
  spec.launch.mpirun_args = {"$(rm -rf /)", "`id`", "$HOME"};
  EXPECT_NE(RenderSbatch(spec).find(config::EmitJobConfig(spec)), std::string::npos);
}

TEST(SlurmRender, AutoDeviceRequestsGpus) {
  config::JobConfig spec = Spec();
  spec.world.device = config::Device::kAuto;
  const std::string s = RenderSbatch(spec);
  EXPECT_TRUE(Has(s, "#SBATCH --gpus-per-node=4"));
  EXPECT_TRUE(Has(s, "# world.device auto: a GPU per rank (world.device cpu requests none)"));
  spec.world.device = config::Device::kCpu;
  EXPECT_EQ(RenderSbatch(spec).find("gpus"), std::string::npos);
}

TEST(SlurmRender, MetricsBindReachableFromOtherHosts) {
  config::JobConfig spec = Spec();
  EXPECT_NE(RenderSbatch(spec).find("metrics:\n  enabled: true\n  bind: \"0.0.0.0\"\n"),
            std::string::npos);
  spec.metrics.bind = "10.0.0.7";  // an address the user chose stays
  EXPECT_NE(RenderSbatch(spec).find("  bind: \"10.0.0.7\"\n"), std::string::npos);
}

TEST(SlurmRender, ExtraDirectivesAndSetupLines) {
  config::JobConfig spec = Spec();
  spec.slurm.directives = {"--constraint=h100", "--exclusive", "--mem=0"};
  spec.slurm.setup = {"module load cuda/13", "source /opt/venv/bin/activate"};
  const std::string s = RenderSbatch(spec);
  const size_t extra = s.find("#SBATCH --constraint=h100\n#SBATCH --exclusive\n#SBATCH --mem=0\n");
  ASSERT_NE(extra, std::string::npos) << s;
  // Every #SBATCH line comes before the first command (sbatch stops reading there).
  EXPECT_LT(extra, s.find("set -euo pipefail"));
  const size_t setup = s.find(
      "set +u\n# shellcheck disable=SC1090,SC1091\n{\nmodule load cuda/13\nsource "
      "/opt/venv/bin/activate\n}\nset -u\n");
  ASSERT_NE(setup, std::string::npos) << s;
  EXPECT_LT(s.find("RINGPILOT_JOB_EOF\n\n"), setup);  // after the job file is written
  EXPECT_LT(setup, s.find("\"$ringpilot\" run"));
  // Bad ones are refused here too (a hand-built job that skipped the key table).
  spec.slurm.directives = {"--time=5"};
  EXPECT_THROW(RenderSbatch(spec), std::invalid_argument);
  spec.slurm.directives = {};
  spec.slurm.setup = {"a\nb"};
  EXPECT_THROW(RenderSbatch(spec), std::invalid_argument);
}

TEST(SlurmRender, RequestedStopIsNotRequeued) {
  const std::string s = RenderSbatch(Spec());
  const size_t check = s.find("if [[ -e \"$run_dir/stop-request\" ]]; then");
  ASSERT_NE(check, std::string::npos);
  EXPECT_LT(check, s.find("scontrol requeue"));
}

TEST(SlurmRender, ValuesAreSingleQuoted) {
  const std::string s = RenderSbatch(Spec());
  EXPECT_TRUE(Has(s, "ringpilot='/opt/ringpilot/bin/ringpilot'"));
  EXPECT_TRUE(Has(s, "run_root='/scratch/runs'"));
}

TEST(SlurmRender, RejectsUnsafeValues) {
  using Job = config::JobConfig;
  for (auto mutate : std::initializer_list<void (*)(Job&)>{
           [](Job& s) { s.name = "a;b"; },
           [](Job& s) { s.slurm.partition = "gpu\n#SBATCH --uid=0"; },
           [](Job& s) { s.slurm.account = "$(id)"; },
           [](Job& s) { s.slurm.run_root = "/tmp/a b"; },
           [](Job& s) { s.slurm.run_root = "-x"; },
           [](Job& s) { s.slurm.ringpilot = "ringpilot'x"; },
           [](Job& s) { s.slurm.time = "2h"; },
           [](Job& s) { s.slurm.signal_seconds = 0; },
       }) {
    Job spec = Spec();
    mutate(spec);
    EXPECT_THROW(RenderSbatch(spec), std::invalid_argument);
  }
}

// A launch.command job: the same allocation and requeue protocol; the embedded job names
// the program (and no model), and the script runs from the submit directory.
TEST(SlurmRender, CommandJobEmbedsTheProgramAndRunsFromTheSubmitDirectory) {
  config::JobConfig job = Spec();
  job.launch.command = {"python3", "train.py", "--lr", "0.1"};
  const std::string s = RenderSbatch(job);
  EXPECT_TRUE(Has(s, "#SBATCH --gpus-per-node=4"));
  EXPECT_TRUE(Has(s, "#SBATCH --requeue"));
  EXPECT_TRUE(Has(s, "  command: [\"python3\", \"train.py\", \"--lr\", \"0.1\"]")) << s;
  EXPECT_EQ(s.find("model:"), std::string::npos) << s;
  EXPECT_TRUE(Has(s, "cd \"${SLURM_SUBMIT_DIR:-.}\""));
  EXPECT_LT(s.find("cd \"${SLURM_SUBMIT_DIR"), s.find("\"$ringpilot\" run \"$job_file\""));
  // The embedded job is what `ringpilot run` reads back.
  const std::string begin = std::string("<<'") + kJobHeredocDelimiter + "'\n";
  const auto from = s.find(begin) + begin.size();
  const std::string embedded =
      s.substr(from, s.find(std::string("\n") + kJobHeredocDelimiter + "\n", from) - from + 1);
  const config::JobConfig back =
      config::ParseJobConfig(embedded, "embedded", {"launch.backend=slurm"});
  EXPECT_EQ(back.launch.command, job.launch.command);
  // A trainer job does not change directory.
  EXPECT_EQ(RenderSbatch(Spec()).find("SLURM_SUBMIT_DIR"), std::string::npos);
}

}  // namespace
}  // namespace ringpilot::slurm
