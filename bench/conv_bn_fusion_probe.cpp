// ringpilot-bench-conv-bn-fusion: which of cuDNN's convolution + batch-norm fusions exist on
// this GPU for ResNet-50's convolutions, and what each costs against the convolution alone
// (issue 28 item 2, before any of it goes into the model).
//
// For every distinct convolution of ResNet-50 v1.5 at batch N (NHWC, bf16 and fp16), through
// the cuDNN frontend's graph API:
//   conv            Y = conv(X, W)
//   conv+stats      Y = conv(X, W), and per-channel sum and sum of squares of Y (genstats)
//   sbr+conv+stats  Y = conv(relu(X * scale + bias), W), with Y's statistics: the previous
//                   batch norm's apply and ReLU done while loading X, this one's statistics
//                   in the epilogue (the runtime-fusion pattern MLPerf's ResNet-50 uses)
// each timed by CUDA events (median of --iters launches after warm-up), or its cuDNN
// error when no engine supports it. Then the unfused batch norm's floor for the same
// tensors: a statistics pass reading Y and an apply pass reading Y and writing it, at the
// HBM bandwidth given (--hbm-gbps). Prints one JSON object per line and a table.
//
// Usage: ringpilot-bench-conv-bn-fusion [--batch 256] [--iters 20] [--hbm-gbps 4800]
//        [--dtype bf16|fp16|both]
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include <cudnn_frontend.h>

namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

#define PROBE_CUDA(call)                                                                          \
  do {                                                                                            \
    const cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

// One convolution of ResNet-50 v1.5 (input 224x224): input NCHW sizes, filter, stride and
// padding, and how many times it occurs in the network.
struct ConvShape {
  const char* name;
  int64_t c, h, w, k, r, s, stride, pad;
  int count;
};

// The bottleneck blocks' convolutions (the stem's 7x7 over 3 channels is left out: no
// batch norm precedes it and its statistics are one pass over a small output).
const ConvShape kResnet50Convs[] = {
    {"l1.conv1 1x1 64->64 @56", 64, 56, 56, 64, 1, 1, 1, 0, 1},
    {"l1.conv2 3x3 64 @56", 64, 56, 56, 64, 3, 3, 1, 1, 3},
    {"l1.conv3 1x1 64->256 @56", 64, 56, 56, 256, 1, 1, 1, 0, 4},  // 3 + downsample
    {"l1.conv1 1x1 256->64 @56", 256, 56, 56, 64, 1, 1, 1, 0, 2},
    {"l2.conv1 1x1 256->128 @56", 256, 56, 56, 128, 1, 1, 1, 0, 1},
    {"l2.conv2 3x3 128 s2 @56", 128, 56, 56, 128, 3, 3, 2, 1, 1},
    {"l2.down 1x1 256->512 s2 @56", 256, 56, 56, 512, 1, 1, 2, 0, 1},
    {"l2.conv3 1x1 128->512 @28", 128, 28, 28, 512, 1, 1, 1, 0, 4},
    {"l2.conv1 1x1 512->128 @28", 512, 28, 28, 128, 1, 1, 1, 0, 3},
    {"l2.conv2 3x3 128 @28", 128, 28, 28, 128, 3, 3, 1, 1, 3},
    {"l3.conv1 1x1 512->256 @28", 512, 28, 28, 256, 1, 1, 1, 0, 1},
    {"l3.conv2 3x3 256 s2 @28", 256, 28, 28, 256, 3, 3, 2, 1, 1},
    {"l3.down 1x1 512->1024 s2 @28", 512, 28, 28, 1024, 1, 1, 2, 0, 1},
    {"l3.conv3 1x1 256->1024 @14", 256, 14, 14, 1024, 1, 1, 1, 0, 6},
    {"l3.conv1 1x1 1024->256 @14", 1024, 14, 14, 256, 1, 1, 1, 0, 5},
    {"l3.conv2 3x3 256 @14", 256, 14, 14, 256, 3, 3, 1, 1, 5},
    {"l4.conv1 1x1 1024->512 @14", 1024, 14, 14, 512, 1, 1, 1, 0, 1},
    {"l4.conv2 3x3 512 s2 @14", 512, 14, 14, 512, 3, 3, 2, 1, 1},
    {"l4.down 1x1 1024->2048 s2 @14", 1024, 14, 14, 2048, 1, 1, 2, 0, 1},
    {"l4.conv3 1x1 512->2048 @7", 512, 7, 7, 2048, 1, 1, 1, 0, 3},
    {"l4.conv1 1x1 2048->512 @7", 2048, 7, 7, 512, 1, 1, 1, 0, 2},
    {"l4.conv2 3x3 512 @7", 512, 7, 7, 512, 3, 3, 1, 1, 2},
};

// The convolution's output height and width.
int64_t OutputH(const ConvShape& s) { return (s.h + 2 * s.pad - s.r) / s.stride + 1; }
int64_t OutputW(const ConvShape& s) { return (s.w + 2 * s.pad - s.s) / s.stride + 1; }

enum class Pattern { kConv, kConvStats, kSbrConvStats };
const char* Name(Pattern p) {
  switch (p) {
    case Pattern::kConv:
      return "conv";
    case Pattern::kConvStats:
      return "conv+stats";
    case Pattern::kSbrConvStats:
      return "sbr+conv+stats";
  }
  return "?";
}

// NHWC strides of an N x C x H x W tensor, as the frontend wants them (dims stay NCHW).
std::vector<int64_t> Nhwc(int64_t c, int64_t h, int64_t w) { return {c * h * w, 1, c * w, c}; }

struct Built {
  std::shared_ptr<fe::graph::Graph> graph;
  std::unordered_map<TensorPtr, void*> pack;
  std::string error;  // empty: built and runnable
};

// Device buffers big enough for the largest shape, shared by every graph.
struct Buffers {
  void* x = nullptr;
  void* w = nullptr;
  void* y = nullptr;
  void* scale = nullptr;
  void* bias = nullptr;
  float* sum = nullptr;
  float* sq_sum = nullptr;
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
};

Built Build(cudnnHandle_t handle, const ConvShape& s, int64_t n, fe::DataType_t io, Pattern p,
            Buffers& buf) {
  Built b;
  b.graph = std::make_shared<fe::graph::Graph>();
  b.graph->set_io_data_type(io)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t ho = OutputH(s), wo = OutputW(s);
  TensorPtr x = b.graph->tensor(fe::graph::Tensor_attributes()
                                    .set_name("x")
                                    .set_dim({n, s.c, s.h, s.w})
                                    .set_stride(Nhwc(s.c, s.h, s.w))
                                    .set_data_type(io));
  TensorPtr wt = b.graph->tensor(fe::graph::Tensor_attributes()
                                     .set_name("w")
                                     .set_dim({s.k, s.c, s.r, s.s})
                                     .set_stride(Nhwc(s.c, s.r, s.s))
                                     .set_data_type(io));
  b.pack[x] = buf.x;
  b.pack[wt] = buf.w;
  TensorPtr input = x;
  if (p == Pattern::kSbrConvStats) {
    TensorPtr scale = b.graph->tensor(fe::graph::Tensor_attributes()
                                          .set_name("scale")
                                          .set_dim({1, s.c, 1, 1})
                                          .set_stride({s.c, 1, s.c, s.c})
                                          .set_data_type(io));
    TensorPtr bias = b.graph->tensor(fe::graph::Tensor_attributes()
                                         .set_name("bias")
                                         .set_dim({1, s.c, 1, 1})
                                         .set_stride({s.c, 1, s.c, s.c})
                                         .set_data_type(io));
    b.pack[scale] = buf.scale;
    b.pack[bias] = buf.bias;
    TensorPtr scaled = b.graph->pointwise(
        x, scale, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::MUL));
    TensorPtr biased = b.graph->pointwise(
        scaled, bias, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
    input = b.graph->pointwise(
        biased, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::RELU_FWD));
  }
  TensorPtr y = b.graph->conv_fprop(input, wt,
                                    fe::graph::Conv_fprop_attributes()
                                        .set_padding({s.pad, s.pad})
                                        .set_stride({s.stride, s.stride})
                                        .set_dilation({1, 1}));
  y->set_output(true).set_dim({n, s.k, ho, wo}).set_stride(Nhwc(s.k, ho, wo)).set_data_type(io);
  b.pack[y] = buf.y;
  if (p != Pattern::kConv) {
    auto [sum, sq_sum] = b.graph->genstats(
        y, fe::graph::Genstats_attributes().set_compute_data_type(fe::DataType_t::FLOAT));
    for (const TensorPtr& t : {sum, sq_sum}) {
      t->set_output(true)
          .set_dim({1, s.k, 1, 1})
          .set_stride({s.k, 1, s.k, s.k})
          .set_data_type(fe::DataType_t::FLOAT);
    }
    b.pack[sum] = buf.sum;
    b.pack[sq_sum] = buf.sq_sum;
  }
  fe::error_t status = b.graph->validate();
  if (status.is_good()) status = b.graph->build_operation_graph(handle);
  if (status.is_good()) status = b.graph->create_execution_plans({fe::HeurMode_t::A});
  if (status.is_good()) status = b.graph->check_support(handle);
  if (status.is_good()) status = b.graph->build_plans(handle, fe::BuildPlanPolicy_t::ALL);
  if (status.is_bad()) {
    b.error = status.get_message();
    return b;
  }
  int64_t ws = 0;
  status = b.graph->get_workspace_size(ws);
  if (status.is_bad()) {
    b.error = status.get_message();
    return b;
  }
  if (ws > buf.workspace_bytes) {
    if (buf.workspace) PROBE_CUDA(cudaFree(buf.workspace));
    PROBE_CUDA(cudaMalloc(&buf.workspace, ws));
    buf.workspace_bytes = ws;
  }
  return b;
}

// Median of `iters` timed launches after 3 warm-up ones, in milliseconds; the error of
// the first failed execute otherwise.
std::optional<double> Time(cudnnHandle_t handle, Built& b, Buffers& buf, int iters,
                           cudaStream_t stream, std::string* error) {
  for (int i = 0; i < 3; ++i) {
    fe::error_t e = b.graph->execute(handle, b.pack, buf.workspace);
    if (e.is_bad()) {
      *error = e.get_message();
      return std::nullopt;
    }
  }
  cudaEvent_t start, stop;
  PROBE_CUDA(cudaEventCreate(&start));
  PROBE_CUDA(cudaEventCreate(&stop));
  std::vector<float> ms(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    PROBE_CUDA(cudaEventRecord(start, stream));
    (void)b.graph->execute(handle, b.pack, buf.workspace);
    PROBE_CUDA(cudaEventRecord(stop, stream));
    PROBE_CUDA(cudaEventSynchronize(stop));
    PROBE_CUDA(cudaEventElapsedTime(&ms[static_cast<size_t>(i)], start, stop));
  }
  PROBE_CUDA(cudaEventDestroy(start));
  PROBE_CUDA(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void FillRandom(void* device, int64_t elements, uint64_t seed) {
  // bf16 and fp16 of small values: random 16-bit patterns with the exponent kept small
  // (0x3c00-0x3dff is 1.0-1.5 in fp16, 0x3c00.. is ~0.008 in bf16: finite either way).
  std::mt19937_64 rng(seed);
  std::vector<uint16_t> host(static_cast<size_t>(elements));
  for (auto& v : host) v = static_cast<uint16_t>(0x3c00 | (rng() & 0x01ff));
  PROBE_CUDA(cudaMemcpy(device, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 256;
  int iters = 20;
  double hbm_gbps = 4800;
  std::string dtypes = "both";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--batch") {
      n = std::atoll(argv[i + 1]);
    } else if (a == "--iters") {
      iters = std::atoi(argv[i + 1]);
    } else if (a == "--hbm-gbps") {
      hbm_gbps = std::atof(argv[i + 1]);
    } else if (a == "--dtype") {
      dtypes = argv[i + 1];
    } else {
      std::fprintf(stderr, "ringpilot-bench-conv-bn-fusion: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (n <= 0 || iters <= 0 || hbm_gbps <= 0 ||
      (dtypes != "bf16" && dtypes != "fp16" && dtypes != "both")) {
    std::fprintf(stderr,
                 "ringpilot-bench-conv-bn-fusion: --batch, --iters and --hbm-gbps must be > 0, "
                 "--dtype bf16, fp16 or both\n");
    return 2;
  }
  cudaDeviceProp prop{};
  PROBE_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("# device %s (sm_%d%d), cuDNN %zu, cuDNN frontend %d, batch %lld\n", prop.name,
              prop.major, prop.minor, cudnnGetVersion(), CUDNN_FRONTEND_VERSION,
              static_cast<long long>(n));
  cudnnHandle_t handle;
  if (cudnnCreate(&handle) != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "ringpilot-bench-conv-bn-fusion: cudnnCreate failed\n");
    return 1;
  }
  cudaStream_t stream;
  PROBE_CUDA(cudaStreamCreate(&stream));
  cudnnSetStream(handle, stream);

  int64_t max_x = 0, max_w = 0, max_y = 0, max_c = 0;
  for (const ConvShape& s : kResnet50Convs) {
    max_x = std::max(max_x, n * s.c * s.h * s.w);
    max_w = std::max(max_w, s.k * s.c * s.r * s.s);
    max_y = std::max(max_y, n * s.k * OutputH(s) * OutputW(s));
    max_c = std::max({max_c, s.c, s.k});
  }
  Buffers buf;
  PROBE_CUDA(cudaMalloc(&buf.x, max_x * 2));
  PROBE_CUDA(cudaMalloc(&buf.w, max_w * 2));
  PROBE_CUDA(cudaMalloc(&buf.y, max_y * 2));
  PROBE_CUDA(cudaMalloc(&buf.scale, max_c * 2));
  PROBE_CUDA(cudaMalloc(&buf.bias, max_c * 2));
  PROBE_CUDA(cudaMalloc(reinterpret_cast<void**>(&buf.sum), max_c * 4));
  PROBE_CUDA(cudaMalloc(reinterpret_cast<void**>(&buf.sq_sum), max_c * 4));
  FillRandom(buf.x, max_x, 1);
  FillRandom(buf.w, max_w, 2);
  FillRandom(buf.scale, max_c, 3);
  FillRandom(buf.bias, max_c, 4);

  std::vector<std::pair<const char*, fe::DataType_t>> types;
  if (dtypes != "fp16") types.push_back({"bf16", fe::DataType_t::BFLOAT16});
  if (dtypes != "bf16") types.push_back({"fp16", fe::DataType_t::HALF});
  std::printf("%-6s %-32s %5s %9s %11s %15s %12s\n", "dtype", "conv", "count", "conv ms",
              "+stats ms", "sbr+conv+st ms", "bn floor ms");
  for (const auto& [type_name, type] : types) {
    double total[3] = {0, 0, 0};
    double total_floor = 0;
    bool complete[3] = {true, true, true};
    for (const ConvShape& s : kResnet50Convs) {
      // Unfused batch norm after this convolution, at the HBM floor: the statistics read Y
      // once, the apply reads Y and writes its result (2 bytes an element each).
      const double y_bytes = static_cast<double>(n * s.k * OutputH(s) * OutputW(s)) * 2;
      const double floor_ms = 3 * y_bytes / (hbm_gbps * 1e9) * 1e3;
      std::optional<double> ms[3];
      std::string err[3];
      for (int pi = 0; pi < 3; ++pi) {
        const Pattern p = static_cast<Pattern>(pi);
        Built b = Build(handle, s, n, type, p, buf);
        if (b.error.empty()) ms[pi] = Time(handle, b, buf, iters, stream, &b.error);
        err[pi] = b.error;
        if (ms[pi]) {
          total[pi] += *ms[pi] * s.count;
        } else {
          complete[pi] = false;
        }
        std::string e = err[pi];
        std::replace(e.begin(), e.end(), '"', '\'');
        std::replace(e.begin(), e.end(), '\n', ' ');
        std::printf(
            "{\"dtype\": \"%s\", \"conv\": \"%s\", \"count\": %d, \"pattern\": \"%s\", \"ms\": %s, "
            "\"error\": \"%s\"}\n",
            type_name, s.name, s.count, Name(p), ms[pi] ? std::to_string(*ms[pi]).c_str() : "null",
            e.c_str());
      }
      total_floor += floor_ms * s.count;
      auto cell = [](const std::optional<double>& v) {
        return v ? std::to_string(*v).substr(0, 6) : std::string("none");
      };
      std::printf("%-6s %-32s %5d %9s %11s %15s %12.4f\n", type_name, s.name, s.count,
                  cell(ms[0]).c_str(), cell(ms[1]).c_str(), cell(ms[2]).c_str(), floor_ms);
    }
    std::printf("%-6s %-32s %5s %9.3f%s %10.3f%s %14.3f%s %12.3f\n", type_name,
                "all (x count, forward)", "", total[0], complete[0] ? "" : "*", total[1],
                complete[1] ? "" : "*", total[2], complete[2] ? "" : "*", total_floor);
  }
  std::printf("# * = some shapes had no engine (see their JSON rows' error)\n");
  cudnnDestroy(handle);
  return 0;
}
