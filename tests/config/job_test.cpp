// Job file parsing, overrides, cross-key checks, emission and the reference document.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config/job.h"

namespace ringpilot::config {
namespace {

constexpr const char* kMinimal = "name: t\nmodel: {name: resnet18-cifar}\n";

// The example under "Job file keys" in the design brief, verbatim.
constexpr const char* kBriefExample = R"(name: quickstart
world:      {nodes: 1, procs_per_node: 2, device: auto}     # cpu | cuda | auto
launch:     {backend: local, hosts: [], max_restarts: 2}    # local | mpi | slurm | k8s
model:      {name: resnet18-cifar}                          # resnet18-cifar | resnet50 | bert-tiny | bert-base
data:       {kind: synthetic, batch_per_rank: 32}           # synthetic | image-folder | tokens
train:      {steps: 100, optimizer: sgd, lr: 0.1, precision: fp32, cuda_graphs: false, seed: 0}
comm:       {bucket_mb: 25, first_bucket_mb: 1, grad_dtype: fp32, timeout_s: 300}
checkpoint: {every_steps: 50, keep: 3}
metrics:    {enabled: true, bind: 127.0.0.1, port_base: 18400}
fault:      {straggler_rank: -1, straggler_ms: 0, crash_rank: -1, crash_step: -1}   # test injection
)";

// Every key set, none to its default.
constexpr const char* kFull = R"(name: full-job_1.0
world:
  nodes: 2
  procs_per_node: 4
  device: cuda
launch:
  backend: mpi
  hosts: ["node-a:4", {host: 10.0.0.2, slots: 8}]
  max_restarts: 5
  master_port: 29600
  mpirun_args: ["--mca", "btl_tcp_if_include lo", "x: \"y\""]
model:
  name: bert-base
  sync_batchnorm: true
  dropout: 0
  seq_len: 512
  num_classes: 3
data:
  kind: synthetic
  batch_per_rank: 16
train:
  steps: 1000000000000
  optimizer: adamw
  lr: 3.0e-4
  momentum: 0.5
  weight_decay: 0.01
  beta1: 0.8
  beta2: 0.95
  eps: 1e-6
  precision: bf16
  cuda_graphs: true
  host_lead_steps: 3
  channels_last: false
  seed: 18446744073709551615
  threads_per_rank: 3
  retain_host_memory: false
  log_every_s: 0.5
comm:
  bucket_mb: 50
  first_bucket_mb: 0.5
  grad_dtype: bf16
  overlap_optimizer: false
  timeout_s: 60.5
  nccl_cta_policy: efficiency
  high_priority_stream: false
checkpoint:
  every_steps: 0
  keep: 7
metrics:
  enabled: false
  bind: 0.0.0.0
  port_base: 0
fault:
  straggler_rank: 7
  straggler_ms: 12.5
  crash_rank: 3
  crash_step: 10
)";

JobConfig Parse(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return ParseJobConfig(text, "f.yaml", overrides);
}

void ExpectSame(const JobConfig& a, const JobConfig& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.world.nodes, b.world.nodes);
  EXPECT_EQ(a.world.procs_per_node, b.world.procs_per_node);
  EXPECT_EQ(a.world.device, b.world.device);
  EXPECT_EQ(a.launch.backend, b.launch.backend);
  ASSERT_EQ(a.launch.hosts.size(), b.launch.hosts.size());
  for (size_t i = 0; i < a.launch.hosts.size(); ++i) {
    EXPECT_EQ(a.launch.hosts[i].host, b.launch.hosts[i].host);
    EXPECT_EQ(a.launch.hosts[i].slots, b.launch.hosts[i].slots);
  }
  EXPECT_EQ(a.launch.max_restarts, b.launch.max_restarts);
  EXPECT_EQ(a.launch.master_port, b.launch.master_port);
  EXPECT_EQ(a.launch.mpirun_args, b.launch.mpirun_args);
  EXPECT_EQ(a.model.name, b.model.name);
  EXPECT_EQ(a.model.sync_batchnorm, b.model.sync_batchnorm);
  EXPECT_EQ(a.model.dropout, b.model.dropout);
  EXPECT_EQ(a.model.seq_len, b.model.seq_len);
  EXPECT_EQ(a.model.num_classes, b.model.num_classes);
  EXPECT_EQ(a.data.kind, b.data.kind);
  EXPECT_EQ(a.data.batch_per_rank, b.data.batch_per_rank);
  EXPECT_EQ(a.train.steps, b.train.steps);
  EXPECT_EQ(a.train.optimizer, b.train.optimizer);
  EXPECT_EQ(a.train.lr, b.train.lr);  // exact: doubles must round-trip bit for bit
  EXPECT_EQ(a.train.momentum, b.train.momentum);
  EXPECT_EQ(a.train.weight_decay, b.train.weight_decay);
  EXPECT_EQ(a.train.beta1, b.train.beta1);
  EXPECT_EQ(a.train.beta2, b.train.beta2);
  EXPECT_EQ(a.train.eps, b.train.eps);
  EXPECT_EQ(a.train.precision, b.train.precision);
  EXPECT_EQ(a.train.cuda_graphs, b.train.cuda_graphs);
  EXPECT_EQ(a.train.channels_last, b.train.channels_last);
  EXPECT_EQ(a.train.seed, b.train.seed);
  EXPECT_EQ(a.train.threads_per_rank, b.train.threads_per_rank);
  EXPECT_EQ(a.train.retain_host_memory, b.train.retain_host_memory);
  EXPECT_EQ(a.comm.overlap_optimizer, b.comm.overlap_optimizer);
  EXPECT_EQ(a.train.log_every_s, b.train.log_every_s);
  EXPECT_EQ(a.comm.bucket_mb, b.comm.bucket_mb);
  EXPECT_EQ(a.comm.first_bucket_mb, b.comm.first_bucket_mb);
  EXPECT_EQ(a.comm.grad_dtype, b.comm.grad_dtype);
  EXPECT_EQ(a.comm.timeout_s, b.comm.timeout_s);
  EXPECT_EQ(a.comm.nccl_cta_policy, b.comm.nccl_cta_policy);
  EXPECT_EQ(a.comm.high_priority_stream, b.comm.high_priority_stream);
  EXPECT_EQ(a.train.host_lead_steps, b.train.host_lead_steps);
  EXPECT_EQ(a.checkpoint.every_steps, b.checkpoint.every_steps);
  EXPECT_EQ(a.checkpoint.keep, b.checkpoint.keep);
  EXPECT_EQ(a.metrics.enabled, b.metrics.enabled);
  EXPECT_EQ(a.metrics.bind, b.metrics.bind);
  EXPECT_EQ(a.metrics.port_base, b.metrics.port_base);
  EXPECT_EQ(a.fault.straggler_rank, b.fault.straggler_rank);
  EXPECT_EQ(a.fault.straggler_ms, b.fault.straggler_ms);
  EXPECT_EQ(a.fault.crash_rank, b.fault.crash_rank);
  EXPECT_EQ(a.fault.crash_step, b.fault.crash_step);
}

TEST(config, FullFileParses) {
  const JobConfig c = Parse(kFull);
  EXPECT_EQ(c.source, "f.yaml");
  EXPECT_EQ(c.name, "full-job_1.0");
  EXPECT_EQ(c.world.nodes, 2);
  EXPECT_EQ(c.world.procs_per_node, 4);
  EXPECT_EQ(c.world.size(), 8);
  EXPECT_EQ(c.world.device, Device::kCuda);
  EXPECT_EQ(c.launch.backend, Backend::kMpi);
  ASSERT_EQ(c.launch.hosts.size(), 2u);
  EXPECT_EQ(c.launch.hosts[0].host, "node-a");
  EXPECT_EQ(c.launch.hosts[0].slots, 4);
  EXPECT_EQ(c.launch.hosts[1].host, "10.0.0.2");
  EXPECT_EQ(c.launch.hosts[1].slots, 8);
  EXPECT_EQ(c.launch.max_restarts, 5);
  EXPECT_EQ(c.launch.master_port, 29600);
  EXPECT_EQ(c.launch.mpirun_args,
            (std::vector<std::string>{"--mca", "btl_tcp_if_include lo", "x: \"y\""}));
  EXPECT_EQ(c.model.name, ModelName::kBertBase);
  EXPECT_TRUE(c.model.sync_batchnorm);
  EXPECT_EQ(c.model.dropout, 0.0);
  EXPECT_EQ(c.model.seq_len, 512);
  EXPECT_EQ(c.model.num_classes, 3);
  EXPECT_EQ(c.data.kind, DataKind::kSynthetic);
  EXPECT_EQ(c.data.batch_per_rank, 16);
  EXPECT_EQ(c.train.steps, 1000000000000LL);
  EXPECT_EQ(c.train.optimizer, Optimizer::kAdamW);
  EXPECT_EQ(c.train.lr, 3.0e-4);
  EXPECT_EQ(c.train.momentum, 0.5);
  EXPECT_EQ(c.train.weight_decay, 0.01);
  EXPECT_EQ(c.train.beta1, 0.8);
  EXPECT_EQ(c.train.beta2, 0.95);
  EXPECT_EQ(c.train.eps, 1e-6);
  EXPECT_EQ(c.train.precision, Precision::kBf16);
  EXPECT_TRUE(c.train.cuda_graphs);
  EXPECT_FALSE(c.train.channels_last);
  EXPECT_EQ(c.train.seed, 18446744073709551615ULL);
  EXPECT_EQ(c.train.threads_per_rank, 3);
  EXPECT_FALSE(c.train.retain_host_memory);
  EXPECT_EQ(c.train.host_lead_steps, 3);
  EXPECT_FALSE(c.comm.overlap_optimizer);
  EXPECT_EQ(c.train.log_every_s, 0.5);
  EXPECT_EQ(c.comm.bucket_mb, 50.0);
  EXPECT_EQ(c.comm.first_bucket_mb, 0.5);
  EXPECT_EQ(c.comm.grad_dtype, GradDtype::kBf16);
  EXPECT_EQ(c.comm.timeout_s, 60.5);
  EXPECT_EQ(c.comm.nccl_cta_policy, NcclCtaPolicy::kEfficiency);
  EXPECT_FALSE(c.comm.high_priority_stream);
  EXPECT_EQ(c.checkpoint.every_steps, 0);
  EXPECT_EQ(c.checkpoint.keep, 7);
  EXPECT_FALSE(c.metrics.enabled);
  EXPECT_EQ(c.metrics.bind, "0.0.0.0");
  EXPECT_EQ(c.metrics.port_base, 0);
  EXPECT_EQ(c.fault.straggler_rank, 7);
  EXPECT_EQ(c.fault.straggler_ms, 12.5);
  EXPECT_EQ(c.fault.crash_rank, 3);
  EXPECT_EQ(c.fault.crash_step, 10);
}

TEST(config, DefaultsApply) {
  const JobConfig c = Parse(kMinimal);
  JobConfig expected;
  expected.name = "t";
  expected.model.name = ModelName::kResnet18Cifar;
  ExpectSame(c, expected);
  EXPECT_EQ(c.world.device, Device::kAuto);
  EXPECT_EQ(c.launch.backend, Backend::kLocal);
  EXPECT_EQ(c.model.num_classes, 10);
  EXPECT_EQ(c.metrics.bind, "auto");
  EXPECT_EQ(c.metrics.port_base, 18400);
  EXPECT_EQ(MetricsPort(c.metrics, 3), 18403);  // base + local rank
}

TEST(config, BriefExampleParses) {
  const JobConfig c = Parse(kBriefExample);
  EXPECT_EQ(c.name, "quickstart");
  EXPECT_EQ(c.world.size(), 2);
  EXPECT_TRUE(c.launch.hosts.empty());
  EXPECT_EQ(c.train.steps, 100);
  EXPECT_EQ(c.comm.bucket_mb, 25.0);
  EXPECT_EQ(c.metrics.port_base, 18400);
  EXPECT_EQ(c.fault.crash_step, -1);
}

TEST(config, Resnet50DefaultsTo1000Classes) {
  EXPECT_EQ(Parse("name: t\nmodel: {name: resnet50}\n").model.num_classes, 1000);
  EXPECT_EQ(Parse("name: t\nmodel: {name: resnet50, num_classes: 10}\n").model.num_classes, 10);
  EXPECT_EQ(Parse(kMinimal, {"model.name=resnet50"}).model.num_classes, 1000);
  EXPECT_EQ(Parse(kMinimal, {"model.name=resnet50", "model.num_classes=5"}).model.num_classes, 5);
}

TEST(config, OverridesApplyInOrder) {
  const JobConfig c =
      Parse(kMinimal, {"train.steps=5", "train.steps=7", "name=other", "launch.backend=mpi",
                       "world.nodes=2", "launch.hosts=[a:2,b:2]", "fault={crash_rank: 1}",
                       "fault={crash_step: 3}", "train.lr=1e-3"});
  EXPECT_EQ(c.train.steps, 7);
  EXPECT_EQ(c.name, "other");
  EXPECT_EQ(c.launch.backend, Backend::kMpi);
  ASSERT_EQ(c.launch.hosts.size(), 2u);
  EXPECT_EQ(c.launch.hosts[1].host, "b");
  EXPECT_EQ(c.launch.hosts[1].slots, 2);
  EXPECT_EQ(c.fault.crash_rank, 1);  // section overrides merge
  EXPECT_EQ(c.fault.crash_step, 3);
  EXPECT_EQ(c.train.lr, 1e-3);
}

TEST(config, OverridesCanSupplyRequiredKeys) {
  const JobConfig c = Parse("world: {nodes: 1}\n", {"name=x", "model.name=bert-tiny"});
  EXPECT_EQ(c.name, "x");
  EXPECT_EQ(c.model.name, ModelName::kBertTiny);
}

TEST(config, RoundTripFull) {
  const JobConfig a = Parse(kFull);
  const std::string text = EmitJobConfig(a);
  const JobConfig b = Parse(text);
  ExpectSame(a, b);
  EXPECT_EQ(EmitJobConfig(b), text);
}

TEST(config, RoundTripDefaultsAndAwkwardValues) {
  JobConfig a = Parse(kMinimal);
  ExpectSame(a, Parse(EmitJobConfig(a)));
  a.train.lr = 0.1 + 0.2;  // 0.30000000000000004
  a.train.eps = 1e-300;
  a.comm.bucket_mb = 1.0 / 3.0;
  a.comm.first_bucket_mb = 2.0 / 7.0;
  a.fault.straggler_ms = 599999.99999999988;
  a.model.dropout = 0.99999999999999989;
  a.launch.mpirun_args = {"true", "~", "null", "", "1", "a: b", "#x", "'q'", "\"dq\"", "{x}", "é"};
  const JobConfig b = Parse(EmitJobConfig(a));
  ExpectSame(a, b);
}

// launch.command: the user's program instead of the built-in trainer.
constexpr const char* kCommandJob = R"(name: mine
world: {procs_per_node: 2, device: cpu}
launch:
  command: [python3, train.py, --lr, "0.1", --epochs, 3, ""]
comm: {timeout_s: 60}
metrics: {port_base: 9500}
placement: {bind: cores}
)";

TEST(config, CommandJobNeedsNoModelAndRoundTrips) {
  const JobConfig c = Parse(kCommandJob);
  EXPECT_TRUE(RunsCommand(c));
  // Plain scalars are arguments as written (YAML keeps `3`), an empty string an argument.
  EXPECT_EQ(c.launch.command,
            (std::vector<std::string>{"python3", "train.py", "--lr", "0.1", "--epochs", "3", ""}));
  EXPECT_EQ(c.comm.timeout_s, 60);
  const std::string text = EmitJobConfig(c);
  // The resolved job leaves out what only the trainer reads; it parses back the same.
  for (const char* absent : {"model:", "data:", "train:", "checkpoint:", "fault:", "trace:",
                             "eval:", "bucket_mb", "gpu_sample_seconds"}) {
    EXPECT_EQ(text.find(absent), std::string::npos) << absent << " in\n" << text;
  }
  EXPECT_NE(text.find("timeout_s: 60"), std::string::npos) << text;
  const JobConfig b = Parse(text);
  EXPECT_EQ(b.launch.command, c.launch.command);
  EXPECT_EQ(EmitJobConfig(b), text);
  // A trainer job's resolved file has no launch.command (an empty list is not allowed).
  EXPECT_EQ(EmitJobConfig(Parse(kMinimal)).find("command"), std::string::npos);
  EXPECT_FALSE(RunsCommand(Parse(kMinimal)));
  // --set can make a trainer job file run a program only when it names no model.
  const JobConfig o = Parse("name: x\n", {"launch.command=[sh, -c, 'exit 0']"});
  EXPECT_EQ(o.launch.command, (std::vector<std::string>{"sh", "-c", "exit 0"}));
}

TEST(config, LoadFromFile) {
  const std::string path = ::testing::TempDir() + "job_config_test.yaml";
  {
    std::ofstream out(path);
    out << kMinimal;
  }
  const JobConfig c = LoadJobConfig(path, {"train.steps=3"});
  EXPECT_EQ(c.source, path);
  EXPECT_EQ(c.train.steps, 3);
  std::remove(path.c_str());
}

TEST(config, MissingFile) {
  try {
    LoadJobConfig("/nonexistent/job.yaml");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "/nonexistent/job.yaml:1:1: <file>: cannot read: No such file or directory");
  }
}

TEST(config, EnumNames) {
  EXPECT_STREQ(ToString(Device::kAuto), "auto");
  EXPECT_STREQ(ToString(Backend::kK8s), "k8s");
  EXPECT_STREQ(ToString(Precision::kBf16), "bf16");
  EXPECT_STREQ(ToString(Optimizer::kAdamW), "adamw");
  EXPECT_STREQ(ToString(GradDtype::kFp32), "fp32");
}

struct BadCase {
  const char* label;
  std::string yaml;
  std::vector<std::string> overrides;
  std::string prefix;  ///< exact start of the message: FILE:LINE:COL: KEY:
  std::string detail;  ///< must appear in the message too
};

// Keeps gtest from printing the struct as bytes.
void PrintTo(const BadCase& c, std::ostream* os) { *os << c.label; }

std::string With(const std::string& extra) { return kMinimal + extra; }

std::vector<BadCase> BadCases() {
  const std::string mpi = "launch:\n  backend: mpi\n";
  return {
      {"unknown top-level key",
       With("trian: {steps: 1}\n"),
       {},
       "f.yaml:3:1: trian:",
       "unknown key (did you mean train?)"},
      {"unknown nested key",
       With("train:\n  stpes: 5\n"),
       {},
       "f.yaml:4:3: train.stpes:",
       "unknown key (did you mean train.steps?)"},
      {"key in the wrong section",
       With("train:\n  bucket_mb: 5\n"),
       {},
       "f.yaml:4:3: train.bucket_mb:",
       "did you mean comm.bucket_mb?"},
      {"string for int",
       With("train:\n  steps: abc\n"),
       {},
       "f.yaml:4:10: train.steps:",
       "expected an integer"},
      {"float for int",
       With("train:\n  steps: 1.5\n"),
       {},
       "f.yaml:4:10: train.steps:",
       "expected an integer"},
      {"exponent for int",
       With("train:\n  steps: 1e3\n"),
       {},
       "f.yaml:4:10: train.steps:",
       "expected an integer"},
      {"quoted int",
       With("train:\n  steps: \"100\"\n"),
       {},
       "f.yaml:4:10: train.steps:",
       "quoted string"},
      {"list for scalar", With("train:\n  lr: [1]\n"), {}, "f.yaml:4:7: train.lr:", "a list"},
      {"map for scalar", With("train:\n  lr: {a: 1}\n"), {}, "f.yaml:4:7: train.lr:", "a mapping"},
      {"scalar for list",
       With("launch:\n  mpirun_args: -v\n"),
       {},
       "f.yaml:4:16: launch.mpirun_args:",
       "expected a list"},
      {"yes for bool",
       With("train:\n  cuda_graphs: yes\n"),
       {},
       "f.yaml:4:16: train.cuda_graphs:",
       "expected true or false"},
      {"negative steps",
       With("train:\n  steps: -5\n"),
       {},
       "f.yaml:4:10: train.steps:",
       "must be in 1..1000000000000"},
      {"lr zero", With("train:\n  lr: 0\n"), {}, "f.yaml:4:7: train.lr:", "must be in (0, 100]"},
      {"dropout one",
       "name: t\nmodel:\n  name: bert-tiny\n  dropout: 1.0\n",
       {},
       "f.yaml:4:12: model.dropout:",
       "must be in [0, 1)"},
      {"port out of range",
       With("metrics:\n  port_base: 70000\n"),
       {},
       "f.yaml:4:14: metrics.port_base:",
       "must be in 0..65535"},
      {"bad enum",
       With("world:\n  device: gpu\n"),
       {},
       "f.yaml:4:11: world.device:",
       "must be one of cpu, cuda, auto"},
      {"bad nccl cta policy",
       With("comm:\n  nccl_cta_policy: fast\n"),
       {},
       "f.yaml:4:20: comm.nccl_cta_policy:",
       "must be one of default, efficiency, zero"},
      {"host lead out of range",
       With(""),
       {"train.host_lead_steps=5"},
       "--set[1]:1:23: train.host_lead_steps:",
       "must be in 1..4"},
      {"bad model",
       "name: t\nmodel: {name: vgg}\n",
       {},
       "f.yaml:2:15: model.name:",
       "must be one of"},
      {"missing name",
       "model: {name: resnet18-cifar}\n",
       {},
       "f.yaml:1:1: name:",
       "required key missing"},
      {"missing model.name",
       "name: t\nmodel: {dropout: 0}\n",
       {},
       "f.yaml:2:1: model.name:",
       "required key missing"},
      {"missing model section", "name: t\n", {}, "f.yaml:1:1: model.name:", "required key missing"},
      {"name with space",
       "name: my job\nmodel: {name: bert-tiny}\n",
       {},
       "f.yaml:1:7: name:",
       "[A-Za-z0-9._-]"},
      {"name with semicolon",
       "name: a;b\nmodel: {name: bert-tiny}\n",
       {},
       "f.yaml:1:7: name:",
       "\"a;b\""},
      {"name with command substitution",
       "name: $(x)\nmodel: {name: bert-tiny}\n",
       {},
       "f.yaml:1:7: name:",
       "\"$(x)\""},
      {"name of 64 chars",
       "name: " + std::string(64, 'a') + "\nmodel: {name: bert-tiny}\n",
       {},
       "f.yaml:1:7: name:",
       "1 to 63"},
      {"duplicate top-level key",
       "name: t\nname: u\nmodel: {name: bert-tiny}\n",
       {},
       "f.yaml:2:1: name:",
       "duplicate key (first given at 1:1)"},
      {"duplicate nested key",
       With("train:\n  steps: 1\n  steps: 2\n"),
       {},
       "f.yaml:5:3: train.steps:",
       "duplicate key"},
      {"duplicate section",
       With("model: {name: bert-tiny}\n"),
       {},
       "f.yaml:3:1: model:",
       "duplicate key"},
      {"yaml syntax error",
       "name: t\nmodel: {name: x\n",
       {},
       "f.yaml:3:1: <yaml>:",
       "end of map flow not found"},
      {"tab indentation", "name: t\n\tmodel: x\n", {}, "f.yaml:2:1: <yaml>:", "tab"},
      {"document is a list", "- a\n- b\n", {}, "f.yaml:1:1: <document>:", "got a list"},
      {"document is a scalar", "hello\n", {}, "f.yaml:1:1: <document>:", "got \"hello\""},
      {"empty file", "", {}, "f.yaml:1:1: <document>:", "empty document"},
      {"comments only", "# nothing\n", {}, "f.yaml:1:1: <document>:", "empty document"},
      {"two documents",
       With("---\nname: u\n"),
       {},
       "f.yaml:4:1: <document>:",
       "more than one YAML document"},
      // yaml-cpp 0.7's LoadAll returned empty documents for ever after a ',' where a node
      // should start, growing until memory ran out (found by tests/fuzz/job_config_fuzzer).
      {"comma first",
       ",\n",
       {},
       "f.yaml:1:1: <yaml>:",
       "unexpected \",\" where a value should start"},
      {"comma after a scalar document", "\"x\",\n", {}, "f.yaml:1:4: <yaml>:", "unexpected \",\""},
      {"comma document", With("---\n,\n"), {}, "f.yaml:4:1: <yaml>:", "unexpected \",\""},
      {"null value",
       With("train:\n  steps:\n  lr: 1\n"),
       {},
       "f.yaml:4:3: train.steps:",
       "null value"},
      {"tilde value", With("train: {steps: ~}\n"), {}, "f.yaml:3:16: train.steps:", "null value"},
      {"section not a mapping",
       With("train: 5\n"),
       {},
       "f.yaml:3:8: train:",
       "expected a mapping of train.* keys"},
      {"null section", With("train:\n"), {}, "f.yaml:3:1: train:", "got null"},
      {"bad host name",
       With(mpi + "  hosts: [\"bad host:2\"]\n"),
       {},
       "f.yaml:5:11: launch.hosts:",
       "host must be"},
      {"bad host slots",
       With(mpi + "  hosts: [a:0]\n"),
       {},
       "f.yaml:5:11: launch.hosts:",
       "slots must be"},
      {"bad host map key",
       With(mpi + "  hosts: [{host: a, slot: 2}]\n"),
       {},
       "f.yaml:5:21: launch.hosts:",
       "unknown key \"slot\""},
      {"host twice",
       With(mpi + "  hosts: [a:2, a:2]\n"),
       {},
       "f.yaml:5:16: launch.hosts:",
       "listed twice"},
      {"mpi without hosts", With(mpi), {}, "f.yaml:4:12: launch.backend:", "launch.hosts"},
      {"mpi hosts != nodes",
       With(mpi + "  hosts: [a:2, b:2]\n"),
       {},
       "f.yaml:5:10: launch.hosts:",
       "one launch.hosts entry per node"},
      {"mpi too few slots",
       With(mpi + "  hosts: [a:1]\n"),
       {},
       "f.yaml:5:10: launch.hosts:",
       "fewer than world.procs_per_node"},
      {"local on two nodes",
       With("world: {nodes: 2}\n"),
       {},
       "f.yaml:3:16: world.nodes:",
       "backend local runs on one node"},
      {"first bucket above bucket",
       With("comm:\n  bucket_mb: 4\n  first_bucket_mb: 8\n"),
       {},
       "f.yaml:5:20: comm.first_bucket_mb:",
       "must be <= comm.bucket_mb (4)"},
      {"first bucket above bucket via override",
       With("comm:\n  first_bucket_mb: 2\n"),
       {"comm.bucket_mb=1.5"},
       "--set[1]:1:16: comm.bucket_mb:",
       "comm.first_bucket_mb (2)"},
      {"cuda graphs on cpu",
       With("world: {device: cpu}\ntrain: {cuda_graphs: true}\n"),
       {},
       "f.yaml:4:22: train.cuda_graphs:",
       "not cpu"},
      {"crash rank outside world",
       With("fault: {crash_rank: 2}\n"),
       {},
       "f.yaml:3:21: fault.crash_rank:",
       "is not a rank of world size 2"},
      {"straggler rank outside world",
       With("fault: {straggler_rank: 5}\n"),
       {},
       "f.yaml:3:25: fault.straggler_rank:",
       "is not a rank"},
      {"crash step after last step",
       With("train: {steps: 10}\nfault: {crash_step: 11}\n"),
       {},
       "f.yaml:4:21: fault.crash_step:",
       "after the last step"},
      {"crash step zero",
       With("fault: {crash_step: 0}\n"),
       {},
       "f.yaml:3:21: fault.crash_step:",
       "must be -1 or at least 1"},
      {"port range past 65535",
       With("metrics: {port_base: 65535}\n"),
       {},
       "f.yaml:3:22: metrics.port_base:",
       "exceeds port 65535"},
      {"bad bind address",
       With("metrics: {bind: 300.1.1.1}\n"),
       {},
       "f.yaml:3:17: metrics.bind:",
       "IPv4 address or a host name"},
      {"port range past 65535 by the ranks of a node",
       With("metrics: {port_base: 65530}\n"),
       {"world.procs_per_node=8"},
       "--set[1]:1:22: world.procs_per_node:",
       "metrics.port_base 65530 + world.procs_per_node 8 - 1 exceeds port 65535"},
      {"basic auth user without password file",
       With("metrics: {basic_auth_user: prom}\n"),
       {},
       "f.yaml:3:28: metrics.basic_auth_user:",
       "needs both metrics.basic_auth_user and metrics.basic_auth_password_file"},
      {"basic auth user with a colon",
       With("metrics: {basic_auth_user: 'a:b', basic_auth_password_file: /p}\n"),
       {},
       "f.yaml:3:28: metrics.basic_auth_user:",
       "may not contain ':'"},
      {"bad override key",
       kMinimal,
       {"train.stpes=5"},
       "--set[1]:1:1: train.stpes:",
       "unknown key (did you mean train.steps?)"},
      {"bad override section",
       kMinimal,
       {"trian.steps=5"},
       "--set[1]:1:1: trian:",
       "did you mean train?"},
      {"bad override value",
       kMinimal,
       {"train.steps=1", "train.steps=abc"},
       "--set[2]:1:13: train.steps:",
       "expected an integer"},
      {"override value out of range",
       kMinimal,
       {"train.lr=0"},
       "--set[1]:1:10: train.lr:",
       "must be in (0, 100]"},
      {"override into a non-section",
       kMinimal,
       {"name.x=1"},
       "--set[1]:1:1: name.x:",
       "name is not a section"},
      {"override below a key",
       kMinimal,
       {"train.steps.x=1"},
       "--set[1]:1:1: train.steps.x:",
       "train.steps is not a section"},
      {"override without =",
       kMinimal,
       {"train.steps"},
       "--set[1]:1:1: train.steps:",
       "expected KEY=VALUE"},
      {"override empty value",
       kMinimal,
       {"train.steps="},
       "--set[1]:1:13: train.steps:",
       "null value"},
      {"override yaml error",
       kMinimal,
       {"launch.hosts=[a:2"},
       "--set[1]:1:14: launch.hosts:",
       "cannot parse value as YAML"},
      {"override bad host element",
       kMinimal,
       {"launch.hosts=[a:2, b:x]"},
       "--set[1]:1:20: launch.hosts:",
       "slots must be"},
      {"override name with shell",
       kMinimal,
       {"name=a;rm -rf /"},
       "--set[1]:1:6: name:",
       "[A-Za-z0-9._-]"},
      {"cifar without data.train",
       kMinimal,
       {"data.kind=cifar"},
       "--set[1]:1:11: data.kind:",
       "data.kind cifar needs data.train"},
      {"cifar with a BERT model",
       kMinimal,
       {"data.kind=cifar", "data.train=/d", "model.name=bert-tiny"},
       "--set[3]:1:12: model.name:",
       "needs model.name resnet18-cifar, not bert-tiny"},
      {"cifar with 1000 classes",
       kMinimal,
       {"data.kind=cifar", "data.train=/d", "model.num_classes=1000"},
       "--set[3]:1:19: model.num_classes:",
       "10 (CIFAR-10) or 100 (CIFAR-100) classes, not 1000"},
      {"label smoothing for BERT",
       kMinimal,
       {"model.name=bert-tiny", "train.label_smoothing=0.1"},
       "--set[2]:1:23: train.label_smoothing:",
       "applies to image models, not bert-tiny"},
      {"epochs without a dataset",
       kMinimal,
       {"train.epochs=3"},
       "--set[1]:1:14: train.epochs:",
       "train.epochs needs a dataset"},
      {"data.val with synthetic data",
       kMinimal,
       {"data.val=/d"},
       "--set[1]:1:10: data.val:",
       "read only by the dataset kinds"},
      {"image_folder without data.train",
       kMinimal,
       {"data.kind=image_folder"},
       "--set[1]:1:11: data.kind:",
       "data.kind image_folder needs data.train"},
      {"image_shards with a BERT model",
       kMinimal,
       {"data.kind=image_shards", "data.train=/d/*.tar", "model.name=bert-tiny"},
       "--set[3]:1:12: model.name:",
       "data.kind image_shards needs an image model (resnet18-cifar, resnet50), not bert-tiny"},
      {"data.prefetch of 0",
       kMinimal,
       {"data.prefetch=0"},
       "--set[1]:1:15: data.prefetch:",
       "must be in 1..64"},
      {"data.max_bad_fraction above 1",
       kMinimal,
       {"data.max_bad_fraction=1.5"},
       "--set[1]:1:23: data.max_bad_fraction:",
       "must be in [0, 1]"},
      {"tokens without data.train",
       kMinimal,
       {"model.name=bert-tiny", "data.kind=tokens"},
       "--set[2]:1:11: data.kind:",
       "data.kind tokens needs data.train"},
      {"tokens with an image model",
       kMinimal,
       {"data.kind=tokens", "data.train=/d"},
       "--set[1]:1:11: data.kind:",
       "needs a BERT model, not resnet18-cifar"},
      {"vocab_size for an image model",
       kMinimal,
       {"model.vocab_size=1000"},
       "--set[1]:1:18: model.vocab_size:",
       "applies to BERT models, not resnet18-cifar"},
      {"synthetic vocab_size too small",
       kMinimal,
       {"model.name=bert-tiny", "model.vocab_size=500"},
       "--set[2]:1:18: model.vocab_size:",
       "model.vocab_size 0 or at least 1024, not 500"},
      {"vocab_size negative",
       kMinimal,
       {"model.vocab_size=-1"},
       "--set[1]:1:18: model.vocab_size:",
       ""},
      {"step schedule without a period",
       kMinimal,
       {"train.lr_schedule=step"},
       "--set[1]:1:19: train.lr_schedule:",
       "needs train.lr_step_every > 0"},
      {"warm-up as long as the run",
       kMinimal,
       {"train.steps=10", "train.lr_warmup_steps=10"},
       "--set[2]:1:23: train.lr_warmup_steps:",
       "leaves no step after the warm-up (train.steps 10)"},
      {"warm-up in epochs without epochs",
       kMinimal,
       {"train.lr_warmup_epochs=2"},
       "--set[1]:1:24: train.lr_warmup_epochs:",
       "needs train.epochs (a warm-up in steps: train.lr_warmup_steps)"},
      {"warm-up epochs as long as the run",
       kMinimal,
       {"data.kind=cifar", "data.train=/d", "train.epochs=5", "train.lr_warmup_epochs=5"},
       "--set[4]:1:24: train.lr_warmup_epochs:",
       "leaves no epoch after the warm-up (train.epochs 5)"},
      {"warm-up in epochs and in steps",
       kMinimal,
       {"data.kind=cifar", "data.train=/d", "train.epochs=5", "train.lr_warmup_steps=10",
        "train.lr_warmup_epochs=1"},
       "--set[5]:1:24: train.lr_warmup_epochs:",
       "two ways to say the warm-up; give one"},
      {"negative base batch",
       kMinimal,
       {"train.lr_base_batch=-256"},
       "--set[1]:1:21: train.lr_base_batch:",
       ""},
      {"unknown schedule",
       kMinimal,
       {"train.lr_schedule=linear"},
       "--set[1]:1:19: train.lr_schedule:",
       "constant"},
      {"no micro-batches",
       kMinimal,
       {"train.grad_accum_steps=0"},
       "--set[1]:1:24: train.grad_accum_steps:",
       "1..1024"},
      {"command: empty list",
       "name: t\nlaunch: {command: []}\n",
       {},
       "f.yaml:2:19: launch.command:",
       "empty list; give the program and its arguments"},
      {"command: not a list",
       "name: t\nlaunch: {command: python3 train.py}\n",
       {},
       "f.yaml:2:19: launch.command:",
       "expected a list: the program and its arguments, e.g. [python3, train.py], got "
       "\"python3 train.py\""},
      {"command: a mapping as an argument",
       "name: t\nlaunch:\n  command: [python3, {lr: 1}]\n",
       {},
       "f.yaml:3:22: launch.command:",
       "expected a string (one argument of the program), got a mapping"},
      {"command: a nested list",
       "name: t\nlaunch:\n  command: [python3, [a, b]]\n",
       {},
       "f.yaml:3:22: launch.command:",
       "expected a string (one argument of the program), got a list"},
      {"command: a null argument",
       "name: t\nlaunch:\n  command: [python3, ~]\n",
       {},
       "f.yaml:3:22: launch.command:",
       "expected a string (one argument of the program), got null"},
      {"command: empty program",
       "name: t\nlaunch:\n  command: [\"\", x]\n",
       {},
       "f.yaml:3:13: launch.command:",
       "the program (the first item) is an empty string"},
      {"command and a model",
       "name: t\nmodel: {name: resnet50}\nlaunch:\n  command: [python3, train.py]\n",
       {},
       "f.yaml:2:15: model.name:",
       "only the built-in trainer reads model.name, but launch.command runs your own program"},
      {"command and a trainer key",
       "name: t\nlaunch:\n  command: [python3, train.py]\ntrain: {steps: 5}\n",
       {},
       "f.yaml:4:16: train.steps:",
       "only the built-in trainer reads train.steps"},
      {"command given by --set to a model job",
       kMinimal,
       {"launch.command=[python3, train.py]"},
       "f.yaml:2:15: model.name:",
       "launch.command runs your own program"},
      {"neither command nor model",
       "name: t\nlaunch: {max_restarts: 1}\n",
       {},
       "f.yaml:1:1: model.name:",
       "required key missing (one of resnet18-cifar, resnet50, bert-tiny, bert-base; or "
       "launch.command to run your own program)"},
      {"negative clipping norm",
       kMinimal,
       {"train.max_grad_norm=-1"},
       "--set[1]:1:21: train.max_grad_norm:",
       ""},
  };
}

class BadConfigTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadConfigTest, RejectedWithPosition) {
  const BadCase& c = GetParam();
  try {
    Parse(c.yaml, c.overrides);
    FAIL() << c.label << ": accepted";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(c.prefix + " ", 0), 0u) << c.label << ": " << msg;
    EXPECT_NE(msg.find(c.detail), std::string::npos) << c.label << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << c.label << ": " << msg;
  }
}

INSTANTIATE_TEST_SUITE_P(config, BadConfigTest, ::testing::ValuesIn(BadCases()),
                         [](const ::testing::TestParamInfo<BadCase>& info) {
                           std::string name;
                           for (const char* p = info.param.label; *p; ++p) {
                             name += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
                           }
                           return name;
                         });

TEST(config, ReferenceListsEveryKey) {
  const std::string md = RenderConfigReference();
  for (const char* key : {"`name`", "`world.nodes`", "`launch.hosts`", "`model.num_classes`",
                          "`train.seed`", "`comm.grad_dtype`", "`checkpoint.keep`",
                          "`metrics.bind`", "`fault.crash_step`", "`data.train`", "`data.val`",
                          "`eval.every_steps`", "`eval.batch_per_rank`", "`model.vocab_size`"}) {
    EXPECT_NE(md.find(key), std::string::npos) << key;
  }
  EXPECT_NE(md.find("| key | type | default | allowed | meaning |"), std::string::npos);
}

TEST(config, DocsConfigMdIsCurrent) {
  const char* source_dir = std::getenv("RINGPILOT_SOURCE_DIR");
  ASSERT_NE(source_dir, nullptr) << "RINGPILOT_SOURCE_DIR is not set (run through ctest)";
  const std::string path = std::string(source_dir) + "/docs/config.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(text.str() == RenderConfigReference())
      << path << " is stale; regenerate it: build/bin/ringpilot-config-reference > docs/config.md";
}

}  // namespace
}  // namespace ringpilot::config
