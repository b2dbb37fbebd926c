// Linear layers of low-precision (bf16/fp16) autocast training with float32 master
// weights, in fewer kernels than at::linear under autocast and with its arithmetic.
//
// Under autocast every use of a linear layer casts its float32 weight and bias to the
// low-precision dtype, and backward casts each gradient back (ToCopyBackward) and sums
// the bias gradient in a separate reduction: on BERT-base at batch 64 that was ~4 ms of
// a 21 ms step on an H200, in ~350 small kernels. Here the low-precision copies
// ("shadows") of all weights are refreshed in a few multi-tensor kernels once per
// forward, and backward writes float32 gradients straight out of the GEMMs.
#pragma once

#include <vector>

#include <ATen/ATen.h>

namespace ringpilot::trainer::ops {

/// out[c] = sum over rows of x[r, c] in float32, for a 2-D x (float32, bfloat16 or
/// float16). On CUDA one pass at memory speed (trainer/ops/column_sum_kernels.h),
/// deterministic; elsewhere at::sum. Not differentiable.
at::Tensor ColumnSumFloat(const at::Tensor& x);

/// What MixedLinear applies to the GEMM's output.
enum class LinearActivation {
  kNone,
  /// Exact (erf) GELU, as at::gelu: y = gelu(x W^T + b). Backward runs GELU's gradient and
  /// the bias gradients' column sums in one pass on CUDA (trainer/ops/gelu_kernels.h).
  kGelu,
};

/// y = x W^T + b with the low-precision weight and bias `shadow_w` [N, K] and `shadow_b`
/// [N] (N = the sum of the layers' output features, or more: rows past the layers' are
/// padding, see ShadowGroupOptions), i.e. the layers of `weights` / `biases` (float32
/// masters, [n_i, K] and [n_i], in that order) applied to the same input at once: y is
/// [rows, N], the layers' outputs side by side, then the padding's. The padding's columns
/// of dy are ignored.
///
/// Forward is autocast's: x cast to the shadow dtype (when it is not already), one GEMM
/// with float32 accumulation and the bias in its epilogue; bit-identical to
/// at::linear(x, w, b) under autocast for a single layer. Backward, for dy:
/// the masters' gradients float32 from the GEMM's float32 accumulator (autocast rounds
/// them to the low dtype first), the bias gradients by ColumnSumFloat, and x's gradient
/// in x's dtype (float32 straight from the GEMM when x is float32). x is 2-D.
///
/// `accumulate_into_grad`: where a master's .grad is a contiguous float32 tensor (the
/// gradient reducer's bucket views), backward adds the gradient into it itself (a
/// one-layer group's weight with the GEMM, beta = 1; a larger group's weights from one GEMM
/// for all, then one multi-tensor add; a bias's in the column sum's second pass) and returns none
/// for that master, so autograd's AccumulateGrad adds nothing (its post-hooks still run, in the
/// same order); other masters as above. Not under double backward (create_graph).
///
/// `activation` kGelu: y = gelu(x W^T + b), the GEMM's output saved for backward (as
/// at::gelu's autograd saves its input); not with padded outputs (gelu(-inf) is NaN).
at::Tensor MixedLinear(const at::Tensor& x, at::TensorList weights, at::TensorList biases,
                       const at::Tensor& shadow_w, const at::Tensor& shadow_b,
                       bool accumulate_into_grad = false,
                       LinearActivation activation = LinearActivation::kNone);

/// How one group's shadow is laid out.
struct ShadowGroupOptions {
  /// The group's output columns are padded to a multiple of this with zero weights and a
  /// bias of -inf. For a group whose output feeds a softmax (the MLM decoder: 30522
  /// words) and whose width is no multiple of 8: each output row then starts 16-byte
  /// aligned, which cuBLAS's TMA kernels need, in the forward GEMM and in both backward
  /// GEMMs that read its gradient; the softmax over the padded row is the same
  /// (exp(-inf) = 0), and so is the gradient of the real columns. 1: no padding.
  int64_t pad_outputs_to = 1;
};

struct ShadowWeightsOptions {
  /// MixedLinear's accumulate_into_grad for every group (model.mixed_linear_accumulate).
  bool accumulate_into_grad = false;
};

/// The shadows of a model's linear layers, grouped by shared input. Not thread-safe;
/// a model owns one and uses it from its forward.
class ShadowWeights {
 public:
  explicit ShadowWeights(ShadowWeightsOptions options = {}) : options_(options) {}

  /// Registers layers (float32 weights [n_i, K] with one K, and biases [n_i]) that take
  /// the same input and so run as one GEMM; returns the group's index. Call before the
  /// first Refresh.
  int AddGroup(std::vector<at::Tensor> weights, std::vector<at::Tensor> biases,
               ShadowGroupOptions group_options = {});

  /// Copies every master into its shadow (of `dtype`, on the masters' device: allocated
  /// on the first call, again if the dtype or device changes), in a few multi-tensor
  /// kernels and without autograd history. Once per forward, before `Forward`: the
  /// masters change in the optimizer step. No host synchronisation; capturable once
  /// allocated.
  void Refresh(at::ScalarType dtype);

  /// MixedLinear of group `group` on x ([rows, K]): [rows, OutputWidth(group)], the sum
  /// of the group's n_i and then its padding; `activation` applied to it (kGelu: not for a
  /// padded group).
  at::Tensor Forward(int group, const at::Tensor& x,
                     LinearActivation activation = LinearActivation::kNone) const;

  /// The width of `group`'s output: the sum of its n_i, rounded up to its pad_outputs_to.
  int64_t OutputWidth(int group) const;

  /// True once Refresh has allocated shadows of `dtype` for the masters' device.
  bool Ready(at::ScalarType dtype, const at::Device& device) const;
  /// True once Refresh has allocated shadows (of any dtype).
  bool Allocated() const { return !shadows_.empty(); }

  /// The shadow of `master` (one of the registered weights or biases, the tensor itself):
  /// a [n_i, K] or [n_i] view of the shadow buffer; undefined for any other tensor or
  /// before the first Refresh.
  at::Tensor ShadowOf(const at::Tensor& master) const;

  /// From now on Refresh copies nothing (it still allocates on its first call): the caller
  /// keeps every ShadowOf view equal to its master, rounded (FusedOptimizer's
  /// SetLowPrecisionCopies writes them with each update). Call once the shadows are
  /// current (after a Refresh); a later Refresh of another dtype or device is an error.
  void HandOverRefresh();

 private:
  struct Group {
    std::vector<at::Tensor> weights, biases;
    ShadowGroupOptions options;
    at::Tensor shadow_w, shadow_b;
  };
  void Allocate(at::ScalarType dtype);
  /// The sum of the group's n_i, rounded up to its pad_outputs_to.
  static int64_t Width(const Group& g);

  ShadowWeightsOptions options_;
  bool handed_over_ = false;  // HandOverRefresh: Refresh no longer copies
  std::vector<Group> groups_;
  std::vector<at::Tensor> masters_, shadows_;
};

}  // namespace ringpilot::trainer::ops
