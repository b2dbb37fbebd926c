// The job key table: one entry per key drives parsing, overrides, emission and the
// reference document (see schema.h); the key builders are in key_builders.cpp.
#include "config/schema.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cstdint>
#include <limits>
#include <set>
#include <type_traits>

#include "base/run_variables.h"
#include "config/enum_names.h"
#include "config/key_builders.h"
#include "config/value_rules.h"

namespace ringpilot::config {
namespace detail {
namespace {

constexpr int64_t kMaxSteps = 1000000000000LL;  // 1e12

std::vector<KeySpec> BuildSchema() {
  using JC = JobConfig;
  std::vector<KeySpec> s;
  KeySpec name = StringKey(
      "name", [](JobConfig& c) -> std::string& { return c.name; }, CheckName,
      "1 to 63 of `[A-Za-z0-9._-]`",
      "job name: run directory, metrics `job` label, Slurm/k8s names");
  name.required = true;
  s.push_back(std::move(name));

  s.push_back(IntKey("world.nodes", Member(&JC::world, &WorldConfig::nodes), 1, 100000,
                     "number of nodes (hosts)"));
  s.push_back(IntKey("world.procs_per_node", Member(&JC::world, &WorldConfig::procs_per_node), 1,
                     1024, "ranks per node (one per GPU on CUDA)"));
  s.push_back(EnumKey("world.device", Member(&JC::world, &WorldConfig::device), Names(kDeviceNames),
                      "where ranks compute; `auto` is CUDA when a GPU is visible, else CPU"));

  s.push_back(EnumKey("launch.backend", Member(&JC::launch, &LaunchConfig::backend),
                      Names(kBackendNames),
                      "how ranks start: this host, mpirun on `hosts`, Slurm, Kubeflow MPIJob"));
  s.push_back(HostsKey("launch.hosts", Member(&JC::launch, &LaunchConfig::hosts)));
  s.push_back(IntKey("launch.max_restarts", Member(&JC::launch, &LaunchConfig::max_restarts), 0,
                     1000,
                     "whole-job restarts from the last checkpoint after a failure; never after "
                     "exit 78 (a job file, port, checkpoint or data error that repeats)"));
  s.push_back(IntKey("launch.master_port", Member(&JC::launch, &LaunchConfig::master_port), 1,
                     65535, "MASTER_PORT given to `ringpilot exec` workers"));
  s.push_back(StringListKey("launch.mpirun_args", Member(&JC::launch, &LaunchConfig::mpirun_args),
                            "extra mpirun arguments, passed verbatim (no shell); choosing "
                            "`btl_vader_single_copy_mechanism` replaces ringpilot's choice "
                            "(`cma` for backend local where a probe shows two processes "
                            "may read each other's memory, else `none`)"));
  s.push_back(
      BoolKey("launch.preflight", Member(&JC::launch, &LaunchConfig::preflight),
              "`ringpilot run` first runs a quick `doctor` on this host (RUN_DIR/doctor.json, "
              "doctor.prom) and refuses to start on a FAIL unless `--force`"));
  s.push_back(CommandKey(
      "launch.command", Member(&JC::launch, &LaunchConfig::command),
      "your own training program instead of the built-in trainer, e.g. [python3, train.py, "
      "--lr, \"0.1\"] (no shell): every rank runs it under `ringpilot exec` (torchrun's "
      "variables, NCCL metrics, placement), its output in logs/rank-N.log; the keys only the "
      "trainer reads (model, data, eval, train, comm but comm.timeout_s, checkpoint, trace, "
      "fault, metrics.gpu_sample_seconds) are then not allowed (docs/programs.md)"));
  s.push_back(FloatKey("launch.start_timeout_s",
                       Member(&JC::launch, &LaunchConfig::start_timeout_s), 0, false, 86400, false,
                       "an attempt none of whose ranks has started by then (no trainer "
                       "heartbeat; for a `launch.command` program, no beat of its rank's "
                       "`ringpilot exec`) is stopped and restarted: mpirun waits for ever on a "
                       "host it cannot reach (docs/faults.md); 0 = wait"));
  s.push_back(FloatKey("launch.abort_grace_s", Member(&JC::launch, &LaunchConfig::abort_grace_s), 0,
                       false, 86400, false,
                       "after a rank gave up (a collective timed out), how long mpirun may take "
                       "to end the attempt before ringpilot stops it and restarts: it waits for "
                       "hosts it cannot reach (docs/faults.md); 0 = wait"));

  KeySpec model = EnumKey("model.name", Member(&JC::model, &ModelConfig::name), Names(kModelNames),
                          "model to train");
  model.required = true;
  model.default_doc = "required (unless `launch.command`)";
  s.push_back(std::move(model));
  s.push_back(BoolKey("model.sync_batchnorm", Member(&JC::model, &ModelConfig::sync_batchnorm),
                      "BatchNorm statistics over the whole world, not per rank"));
  s.push_back(
      BoolKey("model.fused_batchnorm", Member(&JC::model, &ModelConfig::fused_batchnorm),
              "ResNet on CUDA, channels_last: BatchNorm, residual add and ReLU in ringpilot's "
              "fused kernels (training, per-rank statistics)"));
  s.push_back(BoolKey("model.fused_batchnorm_accumulate",
                      Member(&JC::model, &ModelConfig::fused_batchnorm_accumulate),
                      "with model.fused_batchnorm: the BatchNorms' weight and bias gradients "
                      "added into their .grad (the gradient buckets) by the backward kernel "
                      "that computes them, not by an add kernel per parameter"));
  s.push_back(BoolKey("model.maxpool_kernel", Member(&JC::model, &ModelConfig::maxpool_kernel),
                      "ResNet-50 on CUDA, channels_last: the stem's 3x3 stride-2 max-pool by "
                      "ringpilot's kernels (uint8 window offsets, a gather backward), same "
                      "results as ATen's"));
  s.push_back(BoolKey("model.stem_space_to_depth",
                      Member(&JC::model, &ModelConfig::stem_space_to_depth),
                      "ResNet-50: the 7x7 stride-2 stem convolution computed as a 4x4 stride-1 "
                      "convolution over 2x2 space-to-depth blocks of the input (16 channels), "
                      "the same sums in another order; the parameter keeps its shape"));
  s.push_back(BoolKey("model.shortcut_in_gemm", Member(&JC::model, &ModelConfig::shortcut_in_gemm),
                      "ResNet-50: in bottlenecks whose shortcut is their input, the first 1x1 "
                      "convolution as a GEMM whose backward adds the shortcut's gradient in its "
                      "epilogue (no separate sum), and whose weight gradient is float32 from the "
                      "GEMM"));
  s.push_back(BoolKey("model.mixed_linear", Member(&JC::model, &ModelConfig::mixed_linear),
                      "BERT on CUDA with precision bf16: linear layers on low-precision copies of "
                      "the weights refreshed once per step, query/key/value as one GEMM, float32 "
                      "gradients straight from the GEMMs, GELU's backward and the intermediate "
                      "layer's bias gradient in one pass (false: at::linear under autocast)"));
  s.push_back(BoolKey(
      "model.mixed_linear_accumulate", Member(&JC::model, &ModelConfig::mixed_linear_accumulate),
      "with model.mixed_linear (no effect without it): backward adds each weight "
      "gradient (the GEMM, beta = 1) and bias gradient (the column sum), and the word "
      "embeddings' looked-up rows (sorted, summed per id in a fixed order), into the gradient "
      "buffer itself instead of autograd adding it after"));
  s.push_back(BoolKey("model.mixed_linear_optimizer_copies",
                      Member(&JC::model, &ModelConfig::mixed_linear_optimizer_copies),
                      "with model.mixed_linear (no effect without it): the optimizer's update "
                      "writes the low-precision weight copies in the same pass (AdamW on CUDA: "
                      "one kernel) instead of a refresh that reads every float32 weight again "
                      "before each forward"));
  s.push_back(BoolKey("model.fused_residual_norm",
                      Member(&JC::model, &ModelConfig::fused_residual_norm),
                      "BERT with model.mixed_linear (no effect without it): each residual "
                      "block's dropout, float32 add and LayerNorm, and the cast of its output "
                      "for the next linear layer, in one CUDA kernel (backward: two)"));
  s.push_back(FloatKey("model.dropout", Member(&JC::model, &ModelConfig::dropout), 0, false, 1,
                       true, "BERT dropout probability (0 makes runs comparable)"));
  s.push_back(IntKey("model.seq_len", Member(&JC::model, &ModelConfig::seq_len), 8, 8192,
                     "BERT sequence length"));
  KeySpec vocab =
      IntKey("model.vocab_size", Member(&JC::model, &ModelConfig::vocab_size), 0, 1 << 30,
             "BERT vocabulary (embedding and decoder rows); 0 = the data's: "
             "data.kind tokens the shards' vocabulary (a smaller value stops the "
             "job before the first step), synthetic 30522");
  vocab.allowed = "0 or 1024..1073741824 (synthetic), >= the shards' vocabulary (tokens)";
  s.push_back(std::move(vocab));
  KeySpec classes = IntKey("model.num_classes", Member(&JC::model, &ModelConfig::num_classes), 2,
                           100000, "ResNet output classes");
  classes.default_doc = "`10` (`1000` for resnet50)";
  s.push_back(std::move(classes));

  s.push_back(EnumKey("data.kind", Member(&JC::data, &DataConfig::kind), Names(kDataKinds),
                      "input: `synthetic` (generated), `cifar` (CIFAR-10/100 binary batches), "
                      "`image_folder` (ROOT/<class>/<image>.jpg|.png), `image_shards` "
                      "(WebDataset tar shards), `tokens` (pre-tokenised text shards for BERT "
                      "MLM); see data.md"));
  s.push_back(IntKey("data.batch_per_rank", Member(&JC::data, &DataConfig::batch_per_rank), 1,
                     65536, "samples per rank per step"));
  auto any_path = [](const std::string&) { return std::string(); };
  s.push_back(StringKey("data.train", Member(&JC::data, &DataConfig::train), any_path, "path",
                        "cifar: a batch file, or the folder holding data_batch_*.bin "
                        "(CIFAR-10) or train.bin (CIFAR-100); image_folder: the root of "
                        "<class>/<image> folders; image_shards: comma-separated tar files or "
                        "glob patterns (`/d/train-*.tar,/e/x.tar`); tokens: the shard prefix P "
                        "of P.tokens and P.index (`ringpilot data tokenize --out P`); each "
                        "epoch a seeded shuffle, a disjoint part per rank"));
  s.push_back(StringKey("data.val", Member(&JC::data, &DataConfig::val), any_path, "path",
                        "held-out set, as data.train (cifar: test_batch.bin / test.bin or its "
                        "folder, test_batch_*.bin too; tokens: a shard prefix, MLM accuracy and "
                        "loss); \"\" = no evaluation"));
  s.push_back(IntKey("data.prefetch", Member(&JC::data, &DataConfig::prefetch), 1, 64,
                     "image kinds: batches decoded ahead of the training step (host memory: "
                     "prefetch + 2 batches per rank)"));
  s.push_back(IntKey("data.workers", Member(&JC::data, &DataConfig::workers), 0, 256,
                     "image kinds: decode threads per rank; 0 = from the cores the rank is "
                     "bound to (GPU ranks: all but one; CPU ranks: a quarter, at least 1)"));
  s.push_back(IntKey("data.worker_nice", Member(&JC::data, &DataConfig::worker_nice), 0, 19,
                     "image kinds: nice value of the host decode threads (0: the rank's own): "
                     "they yield the cores to the training thread, which keeps the device fed "
                     "(docs/data.md)"));
  s.push_back(FloatKey("data.max_bad_fraction", Member(&JC::data, &DataConfig::max_bad_fraction), 0,
                       false, 1, false,
                       "image kinds: the job fails when bad samples (replaced by substitutes) "
                       "pass this fraction of the samples a rank read (judged over at least "
                       "1000)"));
  s.push_back(EnumKey("data.gpu_decode", Member(&JC::data, &DataConfig::gpu_decode),
                      Names(kGpuDecodeNames),
                      "image kinds on GPU ranks: true decodes JPEGs with nvJPEG (the hardware "
                      "JPEG engines where the GPU has them, else its GPU backend) and crops on "
                      "the GPU, data.workers host threads (0: 8) reading files; false decodes "
                      "on data.workers host threads as CPU ranks do; auto: true where the GPU "
                      "has hardware JPEG engines (A100, H100, H200) and the rank fewer than 12 "
                      "cores, else false (docs/data.md)"));
  s.push_back(IntKey<int64_t>("eval.every_steps", Member(&JC::eval, &EvalConfig::every_steps), 0,
                              kMaxSteps,
                              "evaluate on data.val every N steps; 0 = after the last "
                              "step only"));
  s.push_back(IntKey("eval.batch_per_rank", Member(&JC::eval, &EvalConfig::batch_per_rank), 0,
                     65536, "samples per rank per evaluation batch; 0 = data.batch_per_rank"));

  s.push_back(IntKey<int64_t>("train.steps", Member(&JC::train, &TrainConfig::steps), 1, kMaxSteps,
                              "optimizer steps"));
  s.push_back(IntKey<int64_t>(
      "train.epochs", Member(&JC::train, &TrainConfig::epochs), 0, 1000000,
      "every dataset kind (cifar, image_folder, image_shards, tokens; not synthetic): "
      "passes over data.train instead of train.steps "
      "(steps = epochs x full global batches per epoch; train.steps is then not "
      "used); 0 = train.steps"));
  s.push_back(IntKey<int64_t>(
      "train.timing_skip_steps", Member(&JC::train, &TrainConfig::timing_skip_steps), 0, kMaxSteps,
      "leading steps of each attempt left out of samples_per_second and the step percentiles "
      "(they train as usual; the learning-rate warm-up is train.lr_warmup_steps); 0 = "
      "automatic (the first step, with CUDA graphs up to the first replay), never fewer"));
  s.push_back(EnumKey("train.optimizer", Member(&JC::train, &TrainConfig::optimizer),
                      Names(kOptimizerNames), "optimizer"));
  s.push_back(FloatKey("train.lr", Member(&JC::train, &TrainConfig::lr), 0, true, 100, false,
                       "learning rate: the peak of train.lr_schedule (with "
                       "train.lr_base_batch, per that many samples)"));
  s.push_back(FloatKey("train.momentum", Member(&JC::train, &TrainConfig::momentum), 0, false, 1,
                       true, "SGD momentum"));
  s.push_back(FloatKey("train.weight_decay", Member(&JC::train, &TrainConfig::weight_decay), 0,
                       false, 10, false, "SGD: L2 term; AdamW: decoupled decay"));
  s.push_back(FloatKey("train.label_smoothing", Member(&JC::train, &TrainConfig::label_smoothing),
                       0, false, 1, true,
                       "image models: targets (1 - x) on the label + x spread over all classes "
                       "(torch's CrossEntropyLoss label_smoothing); evaluation loss is plain"));
  s.push_back(EnumKey("train.lr_schedule", Member(&JC::train, &TrainConfig::lr_schedule),
                      Names(kLrScheduleNames),
                      "learning rate over the optimizer steps after train.lr_warmup_steps: "
                      "constant, cosine (to lr x lr_min_ratio at the last step), step (x lr_gamma "
                      "every lr_step_every steps), polynomial (power lr_power to lr x "
                      "lr_min_ratio); docs/recipes.md"));
  s.push_back(IntKey<int64_t>("train.lr_warmup_steps",
                              Member(&JC::train, &TrainConfig::lr_warmup_steps), 0, kMaxSteps,
                              "linear warm-up: step s < N trains at lr x s / N (any schedule)"));
  s.push_back(FloatKey("train.lr_warmup_epochs", Member(&JC::train, &TrainConfig::lr_warmup_epochs),
                       0, false, 1000000, false,
                       "with train.epochs: linear warm-up over this many epochs (fractions "
                       "allowed; each rank makes it train.steps x lr_warmup_epochs / "
                       "train.epochs steps once the steps are known) instead of "
                       "train.lr_warmup_steps; 0 = train.lr_warmup_steps"));
  s.push_back(IntKey<int64_t>(
      "train.lr_base_batch", Member(&JC::train, &TrainConfig::lr_base_batch), 0, kMaxSteps,
      "linear scaling: train.lr is the rate for this many samples per step, and the run "
      "trains at train.lr x global batch / lr_base_batch (global batch = world size x "
      "data.batch_per_rank x train.grad_accum_steps; `lr: 0.1, lr_base_batch: 256` is "
      "ResNet's 0.1 x batch/256); 0 = train.lr as given"));
  s.push_back(FloatKey("train.lr_min_ratio", Member(&JC::train, &TrainConfig::lr_min_ratio), 0,
                       false, 1, false,
                       "cosine and polynomial: the final learning rate as a fraction of train.lr"));
  s.push_back(IntKey<int64_t>("train.lr_step_every",
                              Member(&JC::train, &TrainConfig::lr_step_every), 0, kMaxSteps,
                              "step schedule: steps between decays (required there, > 0)"));
  s.push_back(FloatKey("train.lr_gamma", Member(&JC::train, &TrainConfig::lr_gamma), 0, true, 1,
                       false, "step schedule: factor of each decay"));
  s.push_back(FloatKey("train.lr_power", Member(&JC::train, &TrainConfig::lr_power), 0, true, 16,
                       false, "polynomial schedule: exponent (1 = linear decay)"));
  s.push_back(BoolKey("train.decay_norm_and_bias",
                      Member(&JC::train, &TrainConfig::decay_norm_and_bias),
                      "weight decay on 1-D parameters too (biases, BatchNorm and LayerNorm "
                      "weights), as torch.optim without parameter groups; false: only on "
                      "weights of 2 or more dimensions (convolutions, linear layers, embeddings)"));
  s.push_back(IntKey("train.grad_accum_steps", Member(&JC::train, &TrainConfig::grad_accum_steps),
                     1, 1024,
                     "micro-batches per optimizer step (each its own data.batch_per_rank batch; "
                     "one all-reduce per optimizer step); global batch = world x batch_per_rank "
                     "x grad_accum_steps"));
  s.push_back(FloatKey("train.max_grad_norm", Member(&JC::train, &TrainConfig::max_grad_norm), 0,
                       false, 1e6, false,
                       "clip the gradients' global L2 norm (after the all-reduce) to this, as "
                       "torch.nn.utils.clip_grad_norm_; 0 = off"));
  s.push_back(FloatKey("train.beta1", Member(&JC::train, &TrainConfig::beta1), 0, false, 1, true,
                       "AdamW beta1"));
  s.push_back(FloatKey("train.beta2", Member(&JC::train, &TrainConfig::beta2), 0, false, 1, true,
                       "AdamW beta2"));
  s.push_back(FloatKey("train.eps", Member(&JC::train, &TrainConfig::eps), 0, true, 1, true,
                       "AdamW epsilon"));
  s.push_back(EnumKey("train.precision", Member(&JC::train, &TrainConfig::precision),
                      Names(kPrecisionNames), "compute precision (bf16: autocast)"));
  s.push_back(BoolKey("train.cuda_graphs", Member(&JC::train, &TrainConfig::cuda_graphs),
                      "capture the whole step in a CUDA graph after warm-up (not on cpu)"));
  s.push_back(IntKey("train.host_lead_steps", Member(&JC::train, &TrainConfig::host_lead_steps), 1,
                     4,
                     "CUDA: how many steps the host may enqueue beyond the one the GPU runs "
                     "(a larger lead absorbs host stalls, which stall the other ranks too)"));
  s.push_back(BoolKey("train.channels_last", Member(&JC::train, &TrainConfig::channels_last),
                      "ResNet channels_last (NHWC) memory format, on CUDA and CPU"));
  s.push_back(BoolKey("train.deterministic", Member(&JC::train, &TrainConfig::deterministic),
                      "cuDNN deterministic algorithms without autotuning (benchmark mode off) on "
                      "CUDA: run-to-run identical results, usually slower"));
  s.push_back(BoolKey("train.tf32", Member(&JC::train, &TrainConfig::tf32),
                      "TF32 tensor cores for float32 matmul/convolution on CUDA (false for "
                      "bit-level comparisons)"));
  s.push_back(IntKey<uint64_t>("train.seed", Member(&JC::train, &TrainConfig::seed), 0,
                               std::numeric_limits<uint64_t>::max(),
                               "seed for weights, data and dropout"));
  s.push_back(IntKey("train.threads_per_rank", Member(&JC::train, &TrainConfig::threads_per_rank),
                     0, 1024, "CPU intra-op threads; 0 = cores on the node / local ranks"));
  s.push_back(BoolKey("train.retain_host_memory",
                      Member(&JC::train, &TrainConfig::retain_host_memory),
                      "glibc malloc keeps freed host memory for reuse (no mmap of large blocks, "
                      "no trimming), so tensors allocated every step stop page-faulting; the "
                      "rank's resident size stays at its peak. Ignored where MALLOC_* or "
                      "GLIBC_TUNABLES malloc settings or a preloaded allocator are in the "
                      "environment"));
  s.push_back(FloatKey("train.log_every_s", Member(&JC::train, &TrainConfig::log_every_s), 0.1,
                       false, 3600, false, "rank 0 progress line period, seconds"));

  s.push_back(FloatKey("comm.bucket_mb", Member(&JC::comm, &CommConfig::bucket_mb), 0, true, 4096,
                       false, "gradient bucket cap, MiB"));
  s.push_back(FloatKey("comm.first_bucket_mb", Member(&JC::comm, &CommConfig::first_bucket_mb), 0,
                       true, 4096, false,
                       "first (earliest reduced) bucket cap, MiB; <= bucket_mb"));
  s.push_back(EnumKey("comm.grad_dtype", Member(&JC::comm, &CommConfig::grad_dtype),
                      Names(kGradDtypeNames), "dtype gradients are reduced in"));
  s.push_back(BoolKey("comm.overlap_optimizer", Member(&JC::comm, &CommConfig::overlap_optimizer),
                      "update the parameters of reduced buckets while the last two buckets "
                      "are still being all-reduced"));
  s.push_back(FloatKey("comm.timeout_s", Member(&JC::comm, &CommConfig::timeout_s), 0, true, 86400,
                       false,
                       "collective timeout, seconds (MPI and NCCL): a rank that waits this long "
                       "in one ends the job, and the failure report names the rank behind "
                       "(docs/faults.md); a launch.command job is stopped as hung when a rank's "
                       "NCCL collective is in flight this long (docs/programs.md)"));
  s.push_back(EnumKey("comm.nccl_cta_policy", Member(&JC::comm, &CommConfig::nccl_cta_policy),
                      Names(kCtaPolicyNames),
                      "NCCL's CTA policy (NCCL >= 2.27): default (NCCL's choice), efficiency "
                      "(the fewest CTAs that keep bandwidth: more SMs for the backward pass it "
                      "overlaps), zero (no CTAs wherever NCCL can)"));
  s.push_back(BoolKey("comm.high_priority_stream",
                      Member(&JC::comm, &CommConfig::high_priority_stream),
                      "NCCL's stream at high CUDA priority (its kernels start ahead of queued "
                      "compute); false: normal priority, like the training stream"));
  s.push_back(EnumKey("comm.nccl_buffer_registration",
                      Member(&JC::comm, &CommConfig::nccl_buffer_registration),
                      Names(kBufferRegistrationNames),
                      "gradient buckets in NCCL memory: none (PyTorch's allocator), register "
                      "(ncclCommRegister: the ring writes straight into peers' buckets), "
                      "symmetric (ncclCommWindowRegister, NCCL >= 2.27: its symmetric "
                      "kernels where it picks them)"));
  s.push_back(IntKey("comm.backward_sm_carveout",
                     Member(&JC::comm, &CommConfig::backward_sm_carveout), 0, 128,
                     "CUDA: SMs the backward pass's cuBLAS GEMMs are planned without, left to "
                     "the NCCL kernels that overlap them (0: GEMMs plan for every SM)"));

  s.push_back(IntKey("checkpoint.every_steps",
                     Member(&JC::checkpoint, &CheckpointConfig::every_steps), 0, INT_MAX,
                     "checkpoint period in steps; 0 = only the final checkpoint"));
  s.push_back(IntKey("checkpoint.keep", Member(&JC::checkpoint, &CheckpointConfig::keep), 1, 1000,
                     "checkpoints kept (older ones are deleted)"));

  s.push_back(BoolKey("metrics.enabled", Member(&JC::metrics, &MetricsConfig::enabled),
                      "per-rank Prometheus exporter"));
  s.push_back(StringKey("metrics.bind", Member(&JC::metrics, &MetricsConfig::bind), CheckBind,
                        "`auto`, IPv4 address or host name",
                        "address the exporters listen on; `auto`: the node's address (its host "
                        "name's first non-loopback IPv4, else 0.0.0.0) for a job on several "
                        "nodes or a rank under Slurm (SLURM_JOB_ID) or Kubernetes "
                        "(KUBERNETES_SERVICE_HOST), else 127.0.0.1; `0.0.0.0`: every interface"));
  s.push_back(IntKey("metrics.port_base", Member(&JC::metrics, &MetricsConfig::port_base), 0, 65535,
                     "local rank l serves on port_base + l, or where another job holds "
                     "those, on the first free block of world.procs_per_node ports above "
                     "(RUN_DIR/prometheus-targets.json and the start-up line say which); 0 "
                     "picks free ports",
                     "0..65535; port_base + world.procs_per_node - 1 <= 65535"));
  s.push_back(FloatKey(
      "metrics.gpu_sample_seconds", Member(&JC::metrics, &MetricsConfig::gpu_sample_seconds), 0,
      false, 3600, false, "NVML sampling period of each rank's GPU (ringpilot_gpu_*); 0 = off"));
  s.push_back(StringKey(
      "metrics.basic_auth_user", Member(&JC::metrics, &MetricsConfig::basic_auth_user),
      [](const std::string& v) {
        return v.find(':') == std::string::npos ? std::string()
                                                : "may not contain ':' (RFC 7617), got " + Quote(v);
      },
      "user name without `:`",
      "HTTP basic auth on every exporter (with metrics.basic_auth_password_file); \"\" = none"));
  s.push_back(StringKey(
      "metrics.basic_auth_password_file",
      Member(&JC::metrics, &MetricsConfig::basic_auth_password_file), any_path, "path",
      "file whose first line is the basic auth password, read by each rank at start (so the "
      "password is in no job file or ConfigMap)"));
  s.push_back(StringKey("metrics.tls_cert_file",
                        Member(&JC::metrics, &MetricsConfig::tls_cert_file), any_path, "path",
                        "PEM file with the certificate and its private key: the exporters "
                        "serve HTTPS (needs a civetweb that can load the system's OpenSSL; "
                        "docs/metrics.md); \"\" = HTTP"));
  s.push_back(StringKey("metrics.file_sd_dir", Member(&JC::metrics, &MetricsConfig::file_sd_dir),
                        any_path, "path",
                        "directory for Prometheus' file_sd (`files: [DIR/*.json]`, one glob for "
                        "every run): rank 0 links DIR/<run directory name>.json to "
                        "RUN_DIR/prometheus-targets.json; \"\" = none"));
  s.push_back(BoolKey("trace.enabled", Member(&JC::trace, &TraceConfig::enabled),
                      "per-rank Chrome trace RUN_DIR/trace-rank-N.json (docs/metrics.md)"));
  s.push_back(IntKey("trace.max_events", Member(&JC::trace, &TraceConfig::max_events), 1000,
                     10000000, "trace ring buffer per rank; the newest events are kept"));

  s.push_back(EnumKey("placement.bind", Member(&JC::placement, &PlacementConfig::bind),
                      Names(kBindNames),
                      "CPU binding of each rank: `numa` (the GPU's NUMA node), `cores` (an even "
                      "share of it), `none`; `auto` = numa for GPU ranks, cores for CPU ranks"));

  s.push_back(IntKey("fault.straggler_rank", Member(&JC::fault, &FaultConfig::straggler_rank), -1,
                     INT_MAX, "test injection: rank whose compute is slowed every step; -1 = none",
                     "-1..world size - 1"));
  s.push_back(FloatKey("fault.straggler_ms", Member(&JC::fault, &FaultConfig::straggler_ms), 0,
                       false, 600000, false,
                       "test injection: extra compute per step of the straggler, ms (CPU: a "
                       "sleep after backward; CUDA: a GPU spin before backward, also in graph "
                       "replays)"));
  s.push_back(IntKey("fault.crash_rank", Member(&JC::fault, &FaultConfig::crash_rank), -1, INT_MAX,
                     "test injection: rank that exits at crash_step; -1 = none",
                     "-1..world size - 1"));
  s.push_back(IntKey<int64_t>(
      "fault.crash_step", Member(&JC::fault, &FaultConfig::crash_step), -1, kMaxSteps,
      "test injection: step at which crash_rank exits; -1 = never", "-1, or 1..train.steps",
      [](int64_t v) { return v == 0 ? std::string("must be -1 or at least 1, got 0") : ""; }));

  // slurm: `ringpilot slurm render|submit` (rules shared with slurm/render.h).
  const auto optional_slurm_name = [](const std::string& v) {
    return v.empty() ? std::string() : CheckSlurmName(v);
  };
  s.push_back(StringKey("slurm.partition", Member(&JC::slurm, &SlurmConfig::partition),
                        optional_slurm_name, "\"\" or 1 to 63 of `[A-Za-z0-9._-]`",
                        "sbatch --partition; \"\" = cluster default"));
  s.push_back(StringKey("slurm.account", Member(&JC::slurm, &SlurmConfig::account),
                        optional_slurm_name, "\"\" or 1 to 63 of `[A-Za-z0-9._-]`",
                        "sbatch --account; \"\" = user default"));
  s.push_back(StringKey("slurm.qos", Member(&JC::slurm, &SlurmConfig::qos), optional_slurm_name,
                        "\"\" or 1 to 63 of `[A-Za-z0-9._-]`", "sbatch --qos; \"\" = default"));
  s.push_back(StringKey("slurm.time", Member(&JC::slurm, &SlurmConfig::time), CheckSlurmTime,
                        "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, UNLIMITED",
                        "sbatch --time (job time limit)"));
  s.push_back(IntKey("slurm.signal_seconds", Member(&JC::slurm, &SlurmConfig::signal_seconds), 1,
                     65535, "sbatch --signal=B:USR1@N: seconds before the time limit to requeue"));
  s.push_back(StringKey("slurm.run_root", Member(&JC::slurm, &SlurmConfig::run_root),
                        CheckSlurmPath, "path of `[A-Za-z0-9._/+-]`",
                        "run dir is RUN_ROOT/<name>-$SLURM_JOB_ID (kept across requeue); "
                        "sbatch output goes there too"));
  s.push_back(StringKey(
      "slurm.ringpilot", Member(&JC::slurm, &SlurmConfig::ringpilot),
      [](const std::string& v) { return v.empty() ? std::string() : CheckSlurmPath(v); },
      "\"\" or a path of `[A-Za-z0-9._/+-]`",
      "ringpilot executable on the compute nodes; \"\" = the one that renders"));
  s.push_back(StringListKey(
      "slurm.directives", Member(&JC::slurm, &SlurmConfig::directives),
      "extra #SBATCH lines, e.g. [\"--constraint=h100\", \"--exclusive\", \"--mem=0\"]; "
      "the options rendered from other keys (--time, --nodes, --gpus-per-node, ...) are "
      "refused",
      "list of `--option` or `--option=value` (value of `[A-Za-z0-9._,:=/@%+*|&!^~[]-]`)",
      CheckSbatchDirective));
  s.push_back(StringListKey("slurm.setup", Member(&JC::slurm, &SlurmConfig::setup),
                            "shell lines the batch script runs before `ringpilot run`, in order "
                            "(e.g. \"module load cuda/13\"); a failing line fails the job",
                            "list of one-line strings", CheckSlurmSetupLine));

  // k8s: `ringpilot k8s render` (rules shared with config/value_rules.h).
  const auto rule = [](bool ok, const std::string& what, const std::string& v) {
    return ok ? std::string() : "must be " + what + ", got " + Quote(v);
  };
  s.push_back(StringKey(
      "k8s.image", Member(&JC::k8s, &K8sConfig::image),
      [rule](const std::string& v) {
        return rule(v.empty() || IsImageReference(v), "an image reference", v);
      },
      "image reference (`[A-Za-z0-9._/:@-]`, 1 to 255)",
      "container image with ringpilot and ringpilot-trainer (required by k8s render)"));
  s.push_back(StringKey(
      "k8s.namespace", Member(&JC::k8s, &K8sConfig::namespace_),
      [rule](const std::string& v) { return rule(IsDnsLabel(v), "a DNS label", v); },
      "RFC 1123 DNS label", "namespace of every rendered object"));
  s.push_back(StringKey(
      "k8s.rdma_resource", Member(&JC::k8s, &K8sConfig::rdma_resource),
      [rule](const std::string& v) {
        return rule(v.empty() || IsResourceName(v), "a resource name like rdma/ib", v);
      },
      "\"\" or `prefix/name` (e.g. `rdma/ib`)",
      "extended RDMA resource, 1 per worker pod; \"\" = none"));
  s.push_back(StringKey(
      "k8s.shm_size", Member(&JC::k8s, &K8sConfig::shm_size),
      [rule](const std::string& v) { return rule(IsPositiveQuantity(v), "a quantity", v); },
      "positive quantity (`16Gi`, `512Mi`)", "/dev/shm size (emptyDir, medium Memory)"));
  s.push_back(StringKey(
      "k8s.storage_class", Member(&JC::k8s, &K8sConfig::storage_class),
      [rule](const std::string& v) {
        return rule(v.empty() || IsDnsSubdomain(v), "a DNS subdomain", v);
      },
      "\"\" or RFC 1123 DNS subdomain",
      "checkpoint PVC storage class (ReadWriteMany); \"\" = cluster default"));
  s.push_back(StringKey(
      "k8s.checkpoint_size", Member(&JC::k8s, &K8sConfig::checkpoint_size),
      [rule](const std::string& v) { return rule(IsPositiveQuantity(v), "a quantity", v); },
      "positive quantity", "checkpoint PVC size request"));
  s.push_back(IntKey("k8s.run_as_user", Member(&JC::k8s, &K8sConfig::run_as_user), 1, INT_MAX,
                     "uid (and gid, fsGroup) of every container; never root"));
  s.push_back(StringKey(
      "k8s.cpu_per_rank", Member(&JC::k8s, &K8sConfig::cpu_per_rank),
      [rule](const std::string& v) { return rule(IsPositiveQuantity(v), "a quantity", v); },
      "positive quantity (`8`, `1500m`)",
      "worker pod CPU request and limit: this x world.procs_per_node (equal request and "
      "limit: Guaranteed QoS, whole cores of their own under the static CPU manager)"));
  s.push_back(StringKey(
      "k8s.memory_per_rank", Member(&JC::k8s, &K8sConfig::memory_per_rank),
      [rule](const std::string& v) { return rule(IsPositiveQuantity(v), "a quantity", v); },
      "positive quantity (`32Gi`)",
      "worker pod memory request and limit: this x world.procs_per_node + k8s.shm_size "
      "(/dev/shm is memory the pod is charged for)"));
  s.push_back(StringListKey(
      "k8s.volumes", Member(&JC::k8s, &K8sConfig::volumes),
      "data volumes of the worker pods, mounted where the job's paths (data.train, data.val, "
      "a program's arguments) point: a PersistentVolumeClaim, a host directory or an NFS "
      "export; `:ro` mounts read-only (docs/kubernetes.md, \"Data\")",
      "list of `pvc:CLAIM:/MOUNT`, `hostPath:/DIR:/MOUNT` or `nfs:SERVER:/EXPORT:/MOUNT`, "
      "each optionally ending `:ro`",
      CheckK8sVolume));
  // What only the built-in trainer reads: a launch.command job must not set it (the
  // program takes its own arguments), and its resolved job file leaves it out.
  static const std::set<std::string> kTrainerSections = {"model", "data",       "eval",  "train",
                                                         "comm",  "checkpoint", "trace", "fault"};
  for (KeySpec& k : s) {
    k.trainer_only = (kTrainerSections.count(k.section) != 0 && k.path != "comm.timeout_s") ||
                     k.path == "metrics.gpu_sample_seconds";
  }
  return s;
}

}  // namespace

const std::vector<KeySpec>& Schema() {
  static const std::vector<KeySpec> schema = BuildSchema();
  return schema;
}

const std::vector<std::string>& Sections() {
  static const std::vector<std::string> sections = [] {
    std::vector<std::string> out;
    for (const auto& k : Schema()) {
      if (!k.section.empty() && std::find(out.begin(), out.end(), k.section) == out.end()) {
        out.push_back(k.section);
      }
    }
    return out;
  }();
  return sections;
}

bool IsSection(const std::string& name) {
  const auto& s = Sections();
  return std::find(s.begin(), s.end(), name) != s.end();
}

const KeySpec* FindKey(const std::string& section, const std::string& leaf) {
  for (const auto& k : Schema()) {
    if (k.section == section && k.leaf == leaf) return &k;
  }
  return nullptr;
}

std::string FormatDouble(double v) {
  // Shortest text that reads back as exactly `v`: plain decimals for everyday magnitudes,
  // scientific notation for tiny or huge ones.
  const double mag = v < 0 ? -v : v;
  const bool fixed = mag == 0 || (mag >= 1e-5 && mag < 1e16);
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v,
                               fixed ? std::chars_format::fixed : std::chars_format::scientific);
  return std::string(buf, r.ptr);
}

std::string ModelNameList() { return JoinNames(Names(kModelNames), ""); }

}  // namespace detail

}  // namespace ringpilot::config
