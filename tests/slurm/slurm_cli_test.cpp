// `ringpilot slurm render|submit` through the binary: the script passes `bash -n` and
// shellcheck, runs under a fake Slurm, and submit hands it to sbatch.
#include <string>

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace ringpilot::testing {
namespace {

// No launch.backend: `slurm render` implies it (two nodes would need it otherwise).
constexpr const char* kJob = R"(name: demo-job
world: {nodes: 2, procs_per_node: 2, device: cuda}
model: {name: resnet18-cifar}
train: {steps: 20}
slurm: {partition: gpu, account: proj-1, qos: normal, time: "1-00:00:00", signal_seconds: 120}
)";

std::string WriteJob(const TempDir& dir, const std::string& text = kJob) {
  const std::string path = dir.path() + "/job.yaml";
  WriteFile(path, text);
  return path;
}

TEST(SlurmCli, RenderedScriptPassesBashNAndShellcheck) {
  TempDir dir;
  const std::string job = WriteJob(dir);
  for (const std::string device : {"cuda", "cpu", "auto"}) {
    const ProcessResult r =
        RunProcess({RingpilotBinary(), "slurm", "render", job, "--set", "world.device=" + device,
                    "--set", "slurm.run_root=" + dir.path() + "/runs", "--set",
                    "slurm.directives=[\"--exclusive\", \"--constraint=h100|a100\"]", "--set",
                    "slurm.setup=[\"module load cuda/13\", \"source /opt/venv/bin/activate\"]"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string script = dir.path() + "/job.sbatch";
    WriteFile(script, r.out);
    const ProcessResult n = RunProcess({"bash", "-n", script});
    EXPECT_EQ(n.exit_code, 0) << n.err;
    const ProcessResult sc = RunProcess({"shellcheck", "--shell=bash", script});
    EXPECT_EQ(sc.exit_code, 0) << "shellcheck (installed by scripts/setup.sh):\n"
                               << sc.out << sc.err;
    EXPECT_EQ(r.out.find("--gpus-per-node=2") != std::string::npos, device != "cpu");
    EXPECT_NE(r.out.find("#SBATCH --constraint=h100|a100\n"), std::string::npos);
  }
}

TEST(SlurmCli, ScriptRunsRingpilotWithBackendSlurm) {
  // A fake ringpilot: the script's own logic runs for real under bash.
  TempDir dir;
  const std::string bin = dir.path() + "/bin";
  std::filesystem::create_directories(bin);
  const std::string record = dir.path() + "/ringpilot.args";
  WriteFile(
      bin + "/ringpilot",
      "#!/bin/bash\nprintf '%s\\n' \"$@\" > " + record + "\ncat \"$2\" > " + record + ".job\n",
      true);
  const std::string job = WriteJob(dir);
  const ProcessResult r = RunProcess({RingpilotBinary(), "slurm", "render", job, "--set",
                                      "slurm.run_root=" + dir.path() + "/runs", "--set",
                                      "slurm.ringpilot=" + bin + "/ringpilot"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  WriteFile(dir.path() + "/job.sbatch", r.out);
  const ProcessResult run =
      RunProcess({"bash", dir.path() + "/job.sbatch"}, {{"SLURM_JOB_ID", "4242"},
                                                        {"SLURM_JOB_NODELIST", "n[1-2]"},
                                                        {"PATH", bin + ":/usr/bin:/bin"}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string run_dir = dir.path() + "/runs/demo-job-4242";
  EXPECT_EQ(ReadFile(record), "run\n" + run_dir + "/slurm-job.yaml\n--run-dir\n" + run_dir + "\n");
  // The job file says backend slurm and a metrics bind other hosts can reach (auto: each
  // rank listens on its node's address under Slurm).
  EXPECT_NE(ReadFile(record + ".job").find("  backend: slurm\n"), std::string::npos);
  EXPECT_NE(ReadFile(record + ".job").find("  bind: \"auto\"\n"), std::string::npos);
  EXPECT_NE(run.err.find("ringpilot: job 4242 start "), std::string::npos) << run.err;
  // The embedded job file is the resolved one, and it validates.
  const ProcessResult v = RunProcess({RingpilotBinary(), "validate", record + ".job"});
  EXPECT_EQ(v.exit_code, 0) << v.err;
}

TEST(SlurmCli, Usr1IsForwardedAndAPreemptedRunIsRequeued) {
  // The fake ringpilot sends USR1 to the batch shell (as Slurm does) and exits 75 when the
  // shell forwards it; the fake scontrol records the requeue.
  TempDir dir;
  const std::string bin = dir.path() + "/bin";
  std::filesystem::create_directories(bin);
  const std::string record = dir.path() + "/calls";
  WriteFile(bin + "/scontrol", "#!/bin/sh\necho \"scontrol $*\" >> " + record + "\n", true);
  WriteFile(bin + "/ringpilot",
            "#!/bin/bash\ntrap 'echo \"ringpilot got USR1\" >> " + record +
                "; exit 75' USR1\nkill -USR1 \"$PPID\"\n"
                "for ((i = 0; i < 200; i++)); do sleep 0.05; done\nexit 3\n",
            true);
  const ProcessResult r = RunProcess({RingpilotBinary(), "slurm", "render", WriteJob(dir), "--set",
                                      "slurm.run_root=" + dir.path() + "/runs", "--set",
                                      "slurm.ringpilot=" + bin + "/ringpilot"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  WriteFile(dir.path() + "/job.sbatch", r.out);
  const ProcessResult run =
      RunProcess({"bash", dir.path() + "/job.sbatch"}, {{"SLURM_JOB_ID", "4242"},
                                                        {"SLURM_JOB_NODELIST", "n[1-2]"},
                                                        {"PATH", bin + ":/usr/bin:/bin"}});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(ReadFile(record), "ringpilot got USR1\nscontrol requeue 4242\n");
  EXPECT_NE(run.err.find("checkpointed and stopped; requeueing it"), std::string::npos) << run.err;

  // Any other failure is passed through, without a requeue.
  WriteFile(bin + "/ringpilot", "#!/bin/sh\nexit 3\n", true);
  WriteFile(record, "");
  const ProcessResult failed =
      RunProcess({"bash", dir.path() + "/job.sbatch"}, {{"SLURM_JOB_ID", "4242"},
                                                        {"SLURM_JOB_NODELIST", "n[1-2]"},
                                                        {"PATH", bin + ":/usr/bin:/bin"}});
  EXPECT_EQ(failed.exit_code, 3);
  EXPECT_EQ(ReadFile(record), "");

  // A stop `ringpilot stop` asked for (RUN_DIR/stop-request) ends the job without a requeue.
  WriteFile(bin + "/ringpilot", "#!/bin/bash\ntouch \"$4/stop-request\"\nexit 75\n", true);
  const ProcessResult stopped =
      RunProcess({"bash", dir.path() + "/job.sbatch"}, {{"SLURM_JOB_ID", "4242"},
                                                        {"SLURM_JOB_NODELIST", "n[1-2]"},
                                                        {"PATH", bin + ":/usr/bin:/bin"}});
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_EQ(ReadFile(record), "");
  EXPECT_NE(stopped.err.find("stopped by 'ringpilot stop'"), std::string::npos) << stopped.err;

  // `ringpilot run` says it itself: exit 79 (base::kExitStopped), not requeued.
  WriteFile(bin + "/ringpilot", "#!/bin/bash\nexit 79\n", true);
  const ProcessResult stopped79 =
      RunProcess({"bash", dir.path() + "/job.sbatch"}, {{"SLURM_JOB_ID", "4242"},
                                                        {"SLURM_JOB_NODELIST", "n[1-2]"},
                                                        {"PATH", bin + ":/usr/bin:/bin"}});
  EXPECT_EQ(stopped79.exit_code, 0) << stopped79.err;
  EXPECT_EQ(ReadFile(record), "");
  EXPECT_NE(stopped79.err.find("stopped by 'ringpilot stop'"), std::string::npos) << stopped79.err;
}

TEST(SlurmCli, SubmitRunsSbatchOnTheScript) {
  TempDir dir;
  const std::string bin = dir.path() + "/bin";
  std::filesystem::create_directories(bin);
  const std::string record = dir.path() + "/sbatch.args";
  WriteFile(bin + "/sbatch",
            "#!/bin/bash\nprintf '%s\\n' \"$@\" > " + record + "\ncat \"$1\" > " + record +
                ".script\necho 'Submitted batch job 77'\n",
            true);
  const std::string job = WriteJob(dir);
  const std::string runs = dir.path() + "/runs";
  const ProcessResult r =
      RunProcess({RingpilotBinary(), "slurm", "submit", job, "--set", "slurm.run_root=" + runs},
                 {{"PATH", bin + ":/usr/bin:/bin"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Submitted batch job 77\n");
  EXPECT_EQ(ReadFile(record), runs + "/demo-job.sbatch\n");
  const ProcessResult rendered =
      RunProcess({RingpilotBinary(), "slurm", "render", job, "--set", "slurm.run_root=" + runs});
  EXPECT_EQ(ReadFile(record + ".script"), rendered.out);
  EXPECT_TRUE(Exists(runs));  // sbatch --output goes there
}

TEST(SlurmCli, SubmitPassesSbatchFailureAndMissingSbatch) {
  TempDir dir;
  const std::string bin = dir.path() + "/bin";
  std::filesystem::create_directories(bin);
  const std::string job = WriteJob(dir);
  const std::string runs = "slurm.run_root=" + dir.path() + "/runs";
  ProcessResult r =
      RunProcess({RingpilotBinary(), "slurm", "submit", job, "--set", runs}, {{"PATH", bin}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot run sbatch"), std::string::npos) << r.err;
  WriteFile(bin + "/sbatch", "#!/bin/sh\necho 'sbatch: error: invalid partition' >&2\nexit 3\n",
            true);
  r = RunProcess({RingpilotBinary(), "slurm", "submit", job, "--set", runs},
                 {{"PATH", bin + ":/usr/bin:/bin"}});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("invalid partition"), std::string::npos);
}

TEST(SlurmCli, BadValuesExitTwo) {
  TempDir dir;
  const std::string job = WriteJob(dir);
  for (const std::string set :
       {"slurm.partition=\"gpu;rm\"", "slurm.time=2h", "slurm.run_root=\"/a b\"", "name=\"x$(id)\"",
        "slurm.signal_seconds=0", "slurm.directives=[\"--comment=a b\"]",
        "slurm.directives=[\"--ntasks=3\"]", "launch.backend=mpi"}) {
    const ProcessResult r = RunProcess({RingpilotBinary(), "slurm", "render", job, "--set", set});
    EXPECT_EQ(r.exit_code, 2) << set;
    EXPECT_TRUE(r.out.empty()) << set;
    EXPECT_EQ(SplitLines(r.err).size(), 1u) << r.err;
  }
}

}  // namespace
}  // namespace ringpilot::testing
