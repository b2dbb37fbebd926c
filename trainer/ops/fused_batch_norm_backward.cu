// Backward of the fused BatchNorm (+ residual + ReLU): per-chunk gradient sums of the
// parameters, their merge, then dx (and the residual's gradient). Shared geometry and
// helpers: fused_batch_norm_device.cuh.
#include "trainer/ops/fused_batch_norm_kernels.h"

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "trainer/ops/fused_batch_norm_device.cuh"

namespace ringpilot::trainer::ops::fused_bn {

namespace {

using namespace detail;  // the shared helpers of fused_batch_norm_device.cuh

// Where backward's ReLU mask comes from: none (no ReLU), the saved output y, or x itself.
// Without a residual, y > 0 exactly when the forward's pre-activation
// fmaf(x - mean, invstd * weight, bias) > 0, which backward can recompute from x (read
// anyway) and drop the read of y: one activation-sized stream of three in the reduce and
// of four in the elementwise pass.
// With a residual the forward can leave the mask as bits (ForwardArgs::relu_bits): one
// byte per 8 channels instead of the 16 bits of each y element.
enum class Mask { kNone, kFromY, kFromX, kFromBits };

// Calls launch(std::integral_constant<Mask, M>{}) for `mask`: one switch for every kernel
// templated on the mask.
template <typename Fn>
void WithMask(Mask mask, const Fn& launch) {
  switch (mask) {
    case Mask::kNone:
      launch(std::integral_constant<Mask, Mask::kNone>{});
      break;
    case Mask::kFromY:
      launch(std::integral_constant<Mask, Mask::kFromY>{});
      break;
    case Mask::kFromX:
      launch(std::integral_constant<Mask, Mask::kFromX>{});
      break;
    case Mask::kFromBits:
      launch(std::integral_constant<Mask, Mask::kFromBits>{});
      break;
  }
}

// Per-channel values of one thread's VEC channels that backward keeps in registers.
template <int VEC>
struct ChannelValues {
  float mean[VEC];
  float scale[VEC];  ///< invstd * weight, as the forward computed it (dx's and the mask's)
  float shift[VEC];  ///< bias (kFromX only)
};

template <int VEC, Mask kMask>
__device__ __forceinline__ void LoadChannels(const float* mean, const float* invstd,
                                             const float* weight, const float* bias, int64_t c0,
                                             ChannelValues<VEC>& cv) {
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    cv.mean[i] = mean[c0 + i];
    cv.scale[i] = invstd[c0 + i] * weight[c0 + i];
    if constexpr (kMask == Mask::kFromX) cv.shift[i] = bias[c0 + i];
  }
}

// The mask's sources: y, or the forward's bits.
template <typename T>
struct MaskSource {
  const T* y;
  const uint8_t* bits;
};

// dy, the mask (y or its byte of bits) and x of one row.
template <typename T, int VEC>
struct BackwardRow {
  Raw<T, VEC> dy, y, x;
  unsigned bits;
};

template <typename T, int VEC, Mask kMask>
__device__ __forceinline__ BackwardRow<T, VEC> LoadBackward(const T* dy, const MaskSource<T>& ms,
                                                            const T* x, int64_t o) {
  BackwardRow<T, VEC> l;
  l.dy = LoadRaw<T, VEC>(dy + o);
  if constexpr (kMask == Mask::kFromY) l.y = LoadRaw<T, VEC>(ms.y + o);
  // Bits of channels c0.. of row r: byte (r * channels + c0) / 8 = o / 8, from bit o % 8
  // (channels % 8 == 0); a VEC of 1, 4 or 8 stays inside one byte.
  if constexpr (kMask == Mask::kFromBits) l.bits = unsigned{ms.bits[o >> 3]} >> (o & 7);
  l.x = LoadRaw<T, VEC>(x + o);
  return l;
}

// g = dy masked by the ReLU and x - mean of one row.
template <typename T, int VEC, Mask kMask>
__device__ __forceinline__ void UnpackBackward(const BackwardRow<T, VEC>& raw,
                                               const ChannelValues<VEC>& cv, float (&g)[VEC],
                                               float (&xc)[VEC]) {
  float yv[VEC];
  Unpack<T, VEC>(raw.dy, g);
  if constexpr (kMask == Mask::kFromY) Unpack<T, VEC>(raw.y, yv);
  Unpack<T, VEC>(raw.x, xc);
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    xc[i] -= cv.mean[i];
    if constexpr (kMask == Mask::kFromY) g[i] = yv[i] > 0.f ? g[i] : 0.f;
    if constexpr (kMask == Mask::kFromBits) g[i] = ((raw.bits >> i) & 1u) != 0 ? g[i] : 0.f;
    // ApplyKernel's arithmetic, operation for operation, so the mask is the output's.
    if constexpr (kMask == Mask::kFromX)
      g[i] = fmaf(xc[i], cv.scale[i], cv.shift[i]) > 0.f ? g[i] : 0.f;
  }
}

// Per (chunk, channel): sum(g) and sum(g * x_hat).
template <typename T, int VEC, Mask kMask>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    BackwardReduceKernel(const T* __restrict__ dy, MaskSource<T> ms, const T* __restrict__ x,
                         const float* __restrict__ mean, const float* __restrict__ invstd,
                         const float* __restrict__ weight, const float* __restrict__ bias,
                         int64_t rows, int64_t channels, int64_t rows_per_chunk,
                         float* __restrict__ partial) {
  extern __shared__ float smem[];
  const int64_t c0 = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * VEC;
  const bool active = c0 < channels;
  float n = 0.f;
  float acc[2][VEC] = {};
  if (active) {
    ChannelValues<VEC> cv;
    LoadChannels<VEC, kMask>(mean, invstd, weight, bias, c0, cv);
    const RowRange rr = ThreadRows(rows, rows_per_chunk);
    auto load = [&](int64_t o) { return LoadBackward<T, VEC, kMask>(dy, ms, x, o); };
    auto update = [&](const BackwardRow<T, VEC>& raw, int64_t) {
      float g[VEC], xc[VEC];
      UnpackBackward<T, VEC, kMask>(raw, cv, g, xc);
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        acc[0][i] += g[i];
        acc[1][i] = fmaf(g[i], xc[i], acc[1][i]);
      }
    };
    ForEachRow<kUnrollBackward>(rr, rr.first * channels + c0, rr.step * channels, load, update);
    // sum(g * x_hat) = invstd * sum(g * (x - mean)).
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[1][i] *= invstd[c0 + i];
  }
  BlockCombine<VEC, 2, false>(smem, n, acc);
  if (active && threadIdx.y == 0) WritePartials<VEC>(partial, channels, c0, acc);
}

__global__ void __launch_bounds__(kFinalizeX* kFinalizeY)
    BackwardFinalizeKernel(const float* __restrict__ partial, int64_t chunks, int64_t rows,
                           int64_t rows_per_chunk, int64_t channels,
                           float* __restrict__ grad_weight, float* __restrict__ grad_bias,
                           float* __restrict__ add_grad_weight, float* __restrict__ add_grad_bias) {
  const int64_t c = int64_t{blockIdx.x} * kFinalizeX + threadIdx.x;
  float n;
  float acc[2][1];
  MergeChunks<false>(partial, chunks, channels, rows, rows_per_chunk, c, n, acc);
  if (c >= channels || threadIdx.y != 0) return;
  grad_bias[c] = acc[0][0];
  grad_weight[c] = acc[1][0];
  // The elementwise kernel reads this step's sums above; the parameters' .grad gets them
  // added here instead of by one add kernel per parameter afterwards.
  if (add_grad_weight != nullptr) {
    add_grad_bias[c] += acc[0][0];
    add_grad_weight[c] += acc[1][0];
  }
}

template <typename T, int VEC, Mask kMask, bool kDz>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    BackwardElementwiseKernel(const T* __restrict__ dy, MaskSource<T> ms, const T* __restrict__ x,
                              const float* __restrict__ weight, const float* __restrict__ bias,
                              const float* __restrict__ mean, const float* __restrict__ invstd,
                              const float* __restrict__ grad_weight,
                              const float* __restrict__ grad_bias, T* __restrict__ dx,
                              T* __restrict__ dz, int64_t rows, int64_t channels,
                              int64_t rows_per_chunk) {
  const int64_t c0 = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * VEC;
  if (c0 >= channels) return;
  // dx = scale * (g - mean_g) - (x - mean) * k, with scale = weight * invstd and
  // k = scale * invstd * mean(g * x_hat): four registers per channel.
  const float inv_rows = 1.f / static_cast<float>(rows);
  ChannelValues<VEC> cv;
  LoadChannels<VEC, kMask>(mean, invstd, weight, bias, c0, cv);
  float mean_g[VEC], k[VEC];
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    mean_g[i] = grad_bias[c0 + i] * inv_rows;
    k[i] = cv.scale[i] * invstd[c0 + i] * (grad_weight[c0 + i] * inv_rows);
  }
  const RowRange rr = ThreadRows(rows, rows_per_chunk);
  auto load = [&](int64_t o) { return LoadBackward<T, VEC, kMask>(dy, ms, x, o); };
  auto compute = [&](const BackwardRow<T, VEC>& raw, int64_t o) {
    float g[VEC], xc[VEC], d[VEC];
    UnpackBackward<T, VEC, kMask>(raw, cv, g, xc);
#pragma unroll
    for (int i = 0; i < VEC; ++i) d[i] = fmaf(cv.scale[i], g[i] - mean_g[i], -xc[i] * k[i]);
    Store<T, VEC>(dx + o, d);
    if constexpr (kDz) Store<T, VEC>(dz + o, g);
  };
  ForEachRow<kUnrollBackward>(rr, rr.first * channels + c0, rr.step * channels, load, compute);
}

template <typename T, int VEC>
void LaunchBackward(const BackwardArgs& a, const Plan& plan, cudaStream_t stream) {
  const T* dy = static_cast<const T*>(a.dy);
  const T* y = static_cast<const T*>(a.y);
  const T* x = static_cast<const T*>(a.x);
  T* dx = static_cast<T*>(a.dx);
  T* dz = static_cast<T*>(a.dz);
  const Geometry g = MakeGeometry(plan, a.channels, VEC, 2 * VEC);
  const Mask mask = !a.relu                  ? Mask::kNone
                    : a.relu_bits != nullptr ? Mask::kFromBits
                    : y != nullptr           ? Mask::kFromY
                                             : Mask::kFromX;
  const MaskSource<T> ms{y, a.relu_bits};
  auto reduce = [&](auto kernel) {
    kernel<<<g.grid, g.block, g.smem, stream>>>(dy, ms, x, a.mean, a.invstd, a.weight, a.bias,
                                                a.rows, a.channels, plan.rows_per_chunk,
                                                a.workspace);
  };
  WithMask(mask, [&](auto m) { reduce(BackwardReduceKernel<T, VEC, decltype(m)::value>); });
  const unsigned fin_blocks = static_cast<unsigned>((a.channels + kFinalizeX - 1) / kFinalizeX);
  BackwardFinalizeKernel<<<fin_blocks, dim3(kFinalizeX, kFinalizeY), 0, stream>>>(
      a.workspace, plan.chunks, a.rows, plan.rows_per_chunk, a.channels, a.grad_weight, a.grad_bias,
      a.add_grad_weight, a.add_grad_bias);
  auto elementwise = [&](auto kernel) {
    kernel<<<g.grid, g.block, 0, stream>>>(dy, ms, x, a.weight, a.bias, a.mean, a.invstd,
                                           a.grad_weight, a.grad_bias, dx, dz, a.rows, a.channels,
                                           plan.rows_per_chunk);
  };
  WithMask(mask, [&](auto m) {
    constexpr Mask kMask = decltype(m)::value;
    // dz exists only with a residual, and then the mask never comes from x.
    if constexpr (kMask == Mask::kFromX) {
      elementwise(BackwardElementwiseKernel<T, VEC, kMask, false>);
    } else {
      dz ? elementwise(BackwardElementwiseKernel<T, VEC, kMask, true>)
         : elementwise(BackwardElementwiseKernel<T, VEC, kMask, false>);
    }
  });
}

}  // namespace

const char* Backward(const BackwardArgs& a, cudaStream_t stream) {
  if (const char* e = CheckShape(a.rows, a.channels, a.workspace, a.workspace_floats)) return e;
  if (!a.dy || !a.x || !a.dx || !a.weight || !a.mean || !a.invstd || !a.grad_weight ||
      !a.grad_bias || (a.relu && !a.y && !a.bias)) {
    return "fused_bn: Backward needs dy, x, dx, weight, mean, invstd, grads (and y or bias with "
           "relu)";
  }
  if (a.relu && !a.y && !a.relu_bits && a.dz) {
    return "fused_bn: the ReLU mask comes from x only without a residual (dz)";
  }
  if (a.relu_bits != nullptr && a.channels % 8 != 0) {
    return "fused_bn: relu_bits needs channels % 8 == 0";
  }
  if ((a.add_grad_weight == nullptr) != (a.add_grad_bias == nullptr)) {
    return "fused_bn: Backward adds into both parameter gradients or neither";
  }
  const Plan plan = MakePlan(a.rows, a.channels);
  const bool aligned = Aligned(a.dy) && Aligned(a.x) && Aligned(a.dx) &&
                       (a.y == nullptr || Aligned(a.y)) && (a.dz == nullptr || Aligned(a.dz));
  Dispatch(a.dtype, a.channels, aligned, [&](auto v) {
    using V = decltype(v);
    LaunchBackward<typename V::Type, V::kVec>(a, plan, stream);
  });
  return LastError();
}

}  // namespace ringpilot::trainer::ops::fused_bn
