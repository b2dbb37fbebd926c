// Job file parsing, overrides, emission and the reference document (the rejected keys:
// rejected_keys_test.cpp).
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
