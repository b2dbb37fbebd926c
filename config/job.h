// Job file model: the typed, validated form of `job.yaml` shared by the front end
// (`ringpilot run/validate`) and every `ringpilot-trainer` rank.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ringpilot::config {

/// Where ranks compute. `kAuto` resolves to CUDA when a GPU is visible, else CPU.
enum class Device { kCpu, kCuda, kAuto };
/// How ranks are started: on this host, on listed hosts through mpirun, inside a Slurm
/// allocation, or as a Kubeflow MPIJob.
enum class Backend { kLocal, kMpi, kSlurm, kK8s };
enum class Precision { kFp32, kBf16 };
enum class Optimizer { kSgd, kAdamW };
/// How the learning rate changes over the optimizer steps (train.lr_schedule; docs/recipes.md).
enum class LrSchedule { kConstant, kCosine, kStep, kPolynomial };
enum class GradDtype { kFp32, kBf16 };
/// NCCL's CTA policy (ncclConfig_t::CTAPolicy, NCCL >= 2.27): how many SMs its kernels take.
enum class NcclCtaPolicy { kDefault, kEfficiency, kZero };
enum class NcclBufferRegistration { kNone, kRegister, kSymmetric };
/// data.gpu_decode: auto = the GPU's hardware JPEG engines where it has them, else the host.
enum class GpuDecode { kAuto, kOn, kOff };
/// The models the trainer builds (model.name).
enum class ModelName { kResnet18Cifar, kResnet50, kBertTiny, kBertBase };
/// model.num_classes when the job leaves it out: ImageNet's 1000 for resnet50, else
/// CIFAR-10's 10.
constexpr int DefaultNumClasses(ModelName name) { return name == ModelName::kResnet50 ? 1000 : 10; }
/// Where training samples come from (data.kind).
enum class DataKind { kSynthetic, kCifar, kImageFolder, kImageShards, kTokens };
/// CPU binding of each rank (docs/topology.md): `auto` is `numa` for GPU ranks and `cores`
/// for CPU ranks.
enum class BindMode { kAuto, kNuma, kCores, kNone };

struct HostSlots {
  std::string host;  ///< host name or IPv4 address, validated ([A-Za-z0-9.-]+)
  int slots = 1;     ///< ranks this host may run
};

struct WorldConfig {
  int nodes = 1;
  int procs_per_node = 2;
  Device device = Device::kAuto;
  int size() const { return nodes * procs_per_node; }
};

struct LaunchConfig {
  static constexpr int kDefaultMasterPort = 29500;
  Backend backend = Backend::kLocal;
  std::vector<HostSlots> hosts;          ///< backend mpi: one entry per node
  int max_restarts = 2;                  ///< whole-job restarts from the last checkpoint
  int master_port = kDefaultMasterPort;  ///< MASTER_PORT for `ringpilot exec` workers
  std::vector<std::string> mpirun_args;  ///< extra mpirun arguments, passed verbatim (no shell)
  bool preflight = true;  ///< `ringpilot run` runs a quick `doctor` first (docs/doctor.md)
  /// The user's own program (argv, no shell) instead of the built-in trainer: every rank
  /// runs it under `ringpilot exec` with the torchrun environment. Empty: the trainer
  /// trains model.name. Never an empty list in a job file (leave the key out instead).
  std::vector<std::string> command;
  /// An attempt none of whose ranks has started (heartbeat) by then is stopped and counts as
  /// a failure: mpirun waiting for a host it cannot reach (docs/faults.md). 0 = never.
  double start_timeout_s = 300.0;
  /// After a rank gave up (MPI_Abort), how long mpirun may take to end the attempt before
  /// it is stopped: it waits for hosts it cannot reach (docs/faults.md). 0 = forever.
  double abort_grace_s = 30.0;
};

/// model.vocab_size 0 with synthetic data: BERT's WordPiece vocabulary.
inline constexpr int kSyntheticVocabSize = 30522;
/// Synthetic token sequences use ids from 1000 up: the smallest model.vocab_size they take.
inline constexpr int kMinSyntheticVocabSize = 1024;

struct ModelConfig {
  ModelName name = ModelName::kResnet18Cifar;  ///< required in a job file
  bool sync_batchnorm = false;  ///< BatchNorm statistics over the whole world, not per rank
  bool fused_batchnorm = true;  ///< fused BatchNorm+add+ReLU kernels (CUDA, channels_last)
  bool fused_batchnorm_accumulate = true;  ///< with fused_batchnorm: kernels add into .grad
  bool maxpool_kernel = true;       ///< ResNet-50 on CUDA: the stem max-pool by ringpilot's kernels
  bool stem_space_to_depth = true;  ///< ResNet-50: the 7x7 stride-2 stem as a 4x4 stride-1 conv
  bool shortcut_in_gemm = true;     ///< ResNet-50: shortcut gradients added by the conv1 GEMM
  bool mixed_linear = true;         ///< BERT bf16/fp16 on CUDA: linear layers on shadow weights
  bool mixed_linear_accumulate = true;  ///< with mixed_linear: GEMM adds into .grad
  /// with mixed_linear: the optimizer's update writes the bf16 weight copies
  bool mixed_linear_optimizer_copies = true;
  bool fused_residual_norm = true;  ///< with mixed_linear: dropout + add + LayerNorm kernels
  double dropout = 0.1;             ///< BERT dropout probability (0 makes runs comparable)
  int seq_len = 128;                ///< BERT sequence length
  /// BERT vocabulary (embedding rows); 0 = the data's: data.kind tokens: the shards' vocab
  /// size (a smaller value is an error), synthetic: 30522 (BERT's WordPiece).
  int vocab_size = 0;
  /// ResNet classes; a job that leaves it out gets DefaultNumClasses(name) (the loader
  /// sets it once `name` is known).
  int num_classes = DefaultNumClasses(ModelName::kResnet18Cifar);
};

struct DataConfig {
  DataKind kind = DataKind::kSynthetic;
  int batch_per_rank = 32;
  /// cifar: a batch file or the distribution's folder; image_folder: ROOT/<class>/<image>;
  /// image_shards: comma-separated tar files or glob patterns; tokens: a shard prefix.
  std::string train;
  std::string val;   ///< as train, the held-out set; "" = no evaluation
  int prefetch = 2;  ///< image kinds: batches decoded ahead of the training step
  int workers = 0;   ///< image kinds: decode threads per rank; 0 = from the rank's cores
  double max_bad_fraction = 0.01;           ///< image kinds: bad samples tolerated per sample read
  GpuDecode gpu_decode = GpuDecode::kAuto;  ///< image kinds on GPU ranks: nvJPEG decode
  /// Nice value of the host decode threads (0: the rank's own).
  int worker_nice = 10;
};

/// Evaluation on data.val (image models: top-1, top-5 and loss; BERT: MLM accuracy and loss).
struct EvalConfig {
  int64_t every_steps = 0;  ///< 0: only after the last step
  int batch_per_rank = 0;   ///< 0: data.batch_per_rank
};

struct TrainConfig {
  int64_t steps = 100;
  /// Dataset kinds: train this many epochs instead of `steps` (each rank works out epochs x
  /// full global batches per epoch from the dataset and ignores `steps`); 0 = `steps`.
  int64_t epochs = 0;
  /// Leading steps of each attempt left out of throughput and step-time figures; 0 =
  /// automatic (see config.md). Not the learning-rate warm-up (lr_warmup_steps).
  int64_t timing_skip_steps = 0;
  Optimizer optimizer = Optimizer::kSgd;
  double lr = 0.1;
  double momentum = 0.9;       ///< SGD momentum
  double weight_decay = 0.0;   ///< SGD: L2 term; AdamW: decoupled decay
  double beta1 = 0.9;          ///< AdamW
  double beta2 = 0.999;        ///< AdamW
  double eps = 1e-8;           ///< AdamW
  double label_smoothing = 0;  ///< image models: cross-entropy against smoothed targets
  LrSchedule lr_schedule = LrSchedule::kConstant;
  int64_t lr_warmup_steps = 0;  ///< linear warm-up from 0 to lr (any schedule)
  /// With train.epochs: the warm-up in epochs (steps x lr_warmup_epochs / epochs) instead
  /// of lr_warmup_steps; 0 = lr_warmup_steps.
  double lr_warmup_epochs = 0;
  /// > 0: train.lr is per this many samples; the peak lr is train.lr x GlobalBatch / this
  /// (linear scaling, Goyal et al.); 0 = train.lr as written.
  int64_t lr_base_batch = 0;
  double lr_min_ratio = 0;          ///< cosine, polynomial: final lr as a fraction of lr
  int64_t lr_step_every = 0;        ///< step: multiply by lr_gamma every this many steps
  double lr_gamma = 0.1;            ///< step
  double lr_power = 1.0;            ///< polynomial
  bool decay_norm_and_bias = true;  ///< false: no weight decay on 1-D parameters
  int grad_accum_steps = 1;         ///< micro-batches per optimizer step
  double max_grad_norm = 0;         ///< clip the global gradient L2 norm; 0 = off
  Precision precision = Precision::kFp32;
  bool cuda_graphs = false;
  int host_lead_steps = 1;     ///< CUDA: steps the host may enqueue ahead of the GPU (1-4)
  bool channels_last = true;   ///< ResNet memory format (CUDA and CPU)
  bool deterministic = false;  ///< cuDNN deterministic algorithms, no autotuning (CUDA)
  bool tf32 = true;            ///< TF32 for float32 matmul/convolution on CUDA
  uint64_t seed = 0;
  int threads_per_rank = 0;        ///< CPU intra-op threads; 0 = cores on the node / local ranks
  bool retain_host_memory = true;  ///< malloc keeps freed pages (trainer/startup/host_memory.h)
  double log_every_s = 5.0;        ///< rank 0 progress line period
};

struct CommConfig {
  double bucket_mb = 25.0;
  double first_bucket_mb = 1.0;
  GradDtype grad_dtype = GradDtype::kFp32;
  bool overlap_optimizer = true;  ///< update reduced buckets' parameters before the last ones land
  double timeout_s = 300.0;
  NcclCtaPolicy nccl_cta_policy = NcclCtaPolicy::kDefault;
  bool high_priority_stream = true;  ///< NCCL's stream: high CUDA priority (compute: normal)
  NcclBufferRegistration nccl_buffer_registration = NcclBufferRegistration::kNone;
  int backward_sm_carveout = 0;  ///< CUDA: SMs backward's cuBLAS GEMMs leave to NCCL (0 = none)
};

struct CheckpointConfig {
  int every_steps = 50;  ///< 0 disables periodic checkpoints (the final one is still written)
  int keep = 3;
};

struct MetricsConfig {
  bool enabled = true;
  /// Address the exporters listen on; "auto" (base::kMetricsBindAuto): the node's address
  /// under Slurm or Kubernetes, else 127.0.0.1 (decided by each rank at start).
  std::string bind = "auto";
  /// Local rank l serves on port_base + l (the same ports on every node); 0 picks free
  /// ports. 18400: clear of the Prometheus exporter range 9100-9999 (node_exporter 9100,
  /// dcgm-exporter 9400, ...), of Kubernetes (10250-10259, NodePorts 30000-32767), of
  /// PyTorch's rendezvous ports (29400, 29500) and of Linux's ephemeral range.
  int port_base = 18400;
  double gpu_sample_seconds = 5.0;  ///< NVML sampling period of the rank's GPU; 0 = off
  /// HTTP basic auth: both set, or neither. The password is read from the file (its first
  /// line) by each rank at start, so it appears in no job file, ConfigMap or log.
  std::string basic_auth_user;
  std::string basic_auth_password_file;
  /// PEM file with the certificate and its private key: serve HTTPS; "" = HTTP.
  std::string tls_cert_file;
  /// A directory that Prometheus' file_sd globs (`DIR/*.json`): rank 0 links
  /// DIR/<run directory name>.json to RUN_DIR/prometheus-targets.json; "" = no link.
  std::string file_sd_dir;
};

struct TraceConfig {
  bool enabled = true;      ///< per-rank Chrome trace of step phases and collectives
  int max_events = 100000;  ///< ring buffer size per rank (newest events kept)
};

struct PlacementConfig {
  BindMode bind = BindMode::kAuto;  ///< rank -> CPUs; the plan is logged either way
};

struct FaultConfig {
  int straggler_rank = -1;
  double straggler_ms = 0.0;
  int crash_rank = -1;
  int64_t crash_step = -1;
};

/// `ringpilot slurm render|submit`: the sbatch script's allocation and run directory.
struct SlurmConfig {
  std::string partition;          ///< --partition; "" = cluster default
  std::string account;            ///< --account; "" = user default
  std::string qos;                ///< --qos; "" = default
  std::string time = "01:00:00";  ///< --time: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
  int signal_seconds = 300;       ///< --signal=B:USR1@N: warning before the time limit
  std::string run_root = "runs";  ///< run dir is RUN_ROOT/<name>-$SLURM_JOB_ID; output there too
  std::string ringpilot;          ///< ringpilot on the compute nodes; "" = the rendering binary
  /// Extra `#SBATCH` directives, each `--option` or `--option=value` (config/value_rules.h).
  std::vector<std::string> directives;
  /// Shell lines run by the batch script before `ringpilot run` (modules, containers, venvs).
  std::vector<std::string> setup;
};

/// `ringpilot k8s render`: the Kubeflow MPIJob and its companions.
struct K8sConfig {
  std::string image;                   ///< container image (required to render)
  std::string namespace_ = "default";  ///< key `k8s.namespace`
  std::string rdma_resource;      ///< extended resource, e.g. rdma/ib (1 per worker); "" = none
  std::string shm_size = "16Gi";  ///< /dev/shm emptyDir (medium Memory) size limit
  std::string storage_class;      ///< checkpoint PVC storage class; "" = cluster default
  std::string checkpoint_size = "100Gi";  ///< checkpoint PVC request
  int run_as_user = 1000;                 ///< uid (and gid, fsGroup) of every container
  std::string cpu_per_rank = "8";         ///< worker pod CPU request = limit: this x procs_per_node
  /// Worker pod memory request = limit: this x procs_per_node + shm_size (/dev/shm counts).
  std::string memory_per_rank = "32Gi";
  /// Data volumes of the worker pods, each `pvc:CLAIM:/MOUNT`, `hostPath:/DIR:/MOUNT` or
  /// `nfs:SERVER:/EXPORT:/MOUNT`, optionally ending `:ro` (config::ParseK8sVolume).
  std::vector<std::string> volumes;
};

struct JobConfig {
  std::string name;  ///< [A-Za-z0-9._-]{1,63} (required)
  WorldConfig world;
  LaunchConfig launch;
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  CommConfig comm;
  CheckpointConfig checkpoint;
  MetricsConfig metrics;
  EvalConfig eval;
  TraceConfig trace;
  PlacementConfig placement;
  FaultConfig fault;
  SlurmConfig slurm;
  K8sConfig k8s;
  std::string source;  ///< file the config came from (for messages), not a job key
};

/// The job runs launch.command (a program of the user's) rather than the built-in trainer:
/// model.* and the other trainer-only keys are then not given (config.md, "Programs").
inline bool RunsCommand(const JobConfig& config) { return !config.launch.command.empty(); }

/// Samples per optimizer step: world size x data.batch_per_rank x train.grad_accum_steps.
int64_t GlobalBatch(const JobConfig& config);

/// The learning rate the schedule peaks at: train.lr, times GlobalBatch / train.lr_base_batch
/// when that is set.
double PeakLearningRate(const JobConfig& config);

/// A rejected job file or override: one line per problem, each
/// `FILE:LINE:COL: KEY: problem` (for `--set`, FILE is `--set[N]` and LINE is 1).
/// `what()` is those lines joined by newlines (no trailing newline).
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(const std::string& line);
  /// `lines` must not be empty.
  explicit ConfigError(std::vector<std::string> lines);
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  std::vector<std::string> lines_;
};

/// Reads, type-checks and range-checks `path`, applies `overrides` (`a.b=value`, value
/// parsed as YAML) in order with the same checks, then the cross-key checks.
/// Throws ConfigError listing every problem found in one pass (each key of the file and
/// each override is checked; the cross-key rules run on the keys that passed). A YAML
/// syntax error, an unreadable file or a document that is not a mapping ends the pass
/// at once: one line.
JobConfig LoadJobConfig(const std::string& path, const std::vector<std::string>& overrides = {});

/// As LoadJobConfig, from text; `source` names it in messages.
JobConfig ParseJobConfig(const std::string& yaml_text, const std::string& source,
                         const std::vector<std::string>& overrides = {});

/// As LoadJobConfig for a command that runs the job on `backend` (`ringpilot slurm
/// render` is backend slurm, `k8s render` k8s): launch.backend is `backend` before the
/// cross-key checks, whatever the file says (a job file is portable across backends); an
/// override that sets another backend is an error, reported at the override.
JobConfig LoadJobConfigFor(Backend backend, const std::string& path,
                           const std::vector<std::string>& overrides = {});

/// Canonical YAML with every key (defaults included; a launch.command job without the
/// trainer-only keys, a job without one without launch.command). ParseJobConfig(EmitJobConfig(c))
/// reproduces c exactly.
std::string EmitJobConfig(const JobConfig& config);

/// Markdown reference of every key (type, default, range, meaning): docs/config.md is this.
std::string RenderConfigReference();

/// The metrics port of the rank with node-local rank `local_rank`: metrics.port_base +
/// local_rank, or 0 (pick a free port) when port_base is 0 (base::MetricsPort). The one
/// place the job's rule is written (trainer, k8s manifests, checks).
int MetricsPort(const MetricsConfig& metrics, int local_rank);

const char* ToString(Device d);
const char* ToString(Backend b);
const char* ToString(Precision p);
const char* ToString(Optimizer o);
const char* ToString(LrSchedule s);
const char* ToString(GradDtype g);
const char* ToString(NcclCtaPolicy p);
const char* ToString(NcclBufferRegistration r);
const char* ToString(BindMode b);
const char* ToString(ModelName m);
const char* ToString(DataKind k);
const char* ToString(GpuDecode g);
/// resnet18-cifar and resnet50 (image input); the BERT models take tokens.
bool IsImageModel(ModelName m);

}  // namespace ringpilot::config
