#include "trainer/ops/mixed_linear.h"

#include <limits>
#include <string>
#include <utility>

#include <ATen/ops/_foreach_add.h>
#include <torch/autograd.h>

#include "trainer/ops/grad_accumulation.h"
#include "trainer/ops/low_precision.h"

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "trainer/ops/column_sum_kernels.h"
#include "trainer/ops/gelu_kernels.h"
#include "trainer/ops/tensor_element_type.h"
#endif

namespace ringpilot::trainer::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// grad += a @ b in float32 from low-precision operands (addmm with out_dtype on CUDA:
// the GEMM's epilogue adds into grad).
void AddMatmulFloat(at::Tensor& grad, const at::Tensor& a, const at::Tensor& b) {
  if (a.is_cuda()) {
    at::addmm_out(grad, grad, a, b, at::kFloat, /*beta=*/1, /*alpha=*/1);
  } else {
    grad.addmm_(a.to(at::kFloat), b.to(at::kFloat));
  }
}

// `param`'s .grad when backward may add its gradient into it itself (CanAccumulateInto),
// else undefined.
at::Tensor AccumulableGrad(const at::Tensor& param) {
  at::Tensor grad = param.grad();
  return CanAccumulateInto(grad, param) ? grad : at::Tensor();
}

#ifdef RINGPILOT_WITH_CUDA
// Whether the column-sum kernels take x (2-D, rows of unit stride).
bool ColumnSumKernelTakes(const at::Tensor& x) {
  const bool kernel_dtype = x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16 ||
                            x.scalar_type() == at::kHalf;
  return x.is_cuda() && kernel_dtype && x.stride(1) == 1 && x.size(1) > 0 &&
         x.stride(0) >= x.size(1);
}

column_sum::Args ColumnSumArgs(const at::Tensor& x) {
  column_sum::Args a;
  a.in = x.data_ptr();
  a.dtype = ElementTypeOf(x.scalar_type());
  a.rows = x.size(0);
  a.cols = x.size(1);
  a.ld = x.stride(0);
  return a;
}

// The column ranges of the bias gradients' sums (BiasGradients' contract): `into[i]` where
// defined, else a new float32 tensor put in (*result)[i]; on `like`'s device.
std::vector<column_sum::ColumnRange> BiasRanges(const at::Tensor& like,
                                                const std::vector<int64_t>& outs,
                                                const std::vector<at::Tensor>& into,
                                                std::vector<at::Tensor>* result) {
  const size_t n = outs.size();
  result->assign(n, at::Tensor());
  int64_t total = 0;
  bool returned = false;  // some sum goes back to autograd: it needs a tensor of its own
  for (size_t i = 0; i < n; ++i) {
    total += outs[i];
    returned = returned || !into[i].defined();
  }
  const at::Tensor db =
      returned ? at::empty({total}, like.options().dtype(at::kFloat)) : at::Tensor();
  std::vector<column_sum::ColumnRange> ranges(n);
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    if (into[i].defined()) {
      ranges[i] = {into[i].data_ptr<float>(), offset, offset + outs[i], true};
    } else {
      (*result)[i] = db.narrow(0, offset, outs[i]);
      ranges[i] = {(*result)[i].data_ptr<float>(), offset, offset + outs[i], false};
    }
    offset += outs[i];
  }
  return ranges;
}
#endif

// The bias gradients of a group's layers (column sums of dy over each layer's `outs`
// columns, in order; padding columns past them ignored). `into` holds one entry per layer:
// where it is defined (the layer's .grad, from AccumulableGrad) the sums are added into it and
// the result's entry i is undefined, so AccumulateGrad adds nothing; else entry i is a new
// float32 tensor. On CUDA one column sum writes every destination in its second pass (no
// separate add per bias: BERT-base has 74 of them per step).
std::vector<at::Tensor> BiasGradients(const at::Tensor& dy, const std::vector<int64_t>& outs,
                                      const std::vector<at::Tensor>& into) {
  const size_t n = outs.size();
  std::vector<at::Tensor> result(n);
#ifdef RINGPILOT_WITH_CUDA
  if (ColumnSumKernelTakes(dy) && n <= static_cast<size_t>(column_sum::kMaxColumnRanges)) {
    const c10::cuda::CUDAGuard guard(dy.device());
    const std::vector<column_sum::ColumnRange> ranges = BiasRanges(dy, outs, into, &result);
    column_sum::Args a = ColumnSumArgs(dy);
    // From the caching allocator, so the backward stays capturable.
    at::Tensor workspace =
        at::empty({column_sum::WorkspaceFloatsTo(a)}, dy.options().dtype(at::kFloat));
    a.workspace = workspace.data_ptr<float>();
    const char* error = column_sum::ColumnSumTo(a, ranges.data(), static_cast<int>(n),
                                                at::cuda::getCurrentCUDAStream(dy.get_device()));
    TORCH_CHECK(error == nullptr, "MixedLinear bias gradients: ", error);
    return result;
  }
#endif
  const at::Tensor db = ColumnSumFloat(dy);
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor sum = db.narrow(0, offset, outs[i]);
    if (into[i].defined()) {
      into[i].add_(sum);
    } else {
      result[i] = sum;
    }
    offset += outs[i];
  }
  return result;
}

// GELU's backward for `grad_out` at GELU's input `h`, and the bias gradients of the
// group's layers from it (BiasGradients' contract for `into` and *bias). Returns h's
// gradient. On CUDA in one pass over the rows (gelu_kernels.h): the bias sums come from
// the values as they are written, not from a second read.
at::Tensor GeluBackwardAndBiasGradients(const at::Tensor& grad_out, const at::Tensor& h,
                                        const std::vector<int64_t>& outs,
                                        const std::vector<at::Tensor>& into,
                                        std::vector<at::Tensor>* bias) {
#ifdef RINGPILOT_WITH_CUDA
  const bool low = h.scalar_type() == at::kBFloat16 || h.scalar_type() == at::kHalf;
  if (h.is_cuda() && low && grad_out.scalar_type() == h.scalar_type() && h.dim() == 2 &&
      h.size(0) > 0 && h.size(1) > 0 && h.is_contiguous() && grad_out.is_contiguous() &&
      grad_out.sizes() == h.sizes() && outs.size() <= size_t{column_sum::kMaxColumnRanges}) {
    const c10::cuda::CUDAGuard guard(h.device());
    at::Tensor grad_in = at::empty_like(h);
    std::vector<column_sum::ColumnRange> ranges = BiasRanges(h, outs, into, bias);
    gelu::BackwardArgs a;
    a.grad_out = grad_out.data_ptr();
    a.input = h.data_ptr();
    a.grad_input = grad_in.data_ptr();
    a.dtype = ElementTypeOf(h.scalar_type());
    a.rows = h.size(0);
    a.cols = h.size(1);
    a.ranges = ranges.data();
    a.range_count = static_cast<int>(ranges.size());
    // From the caching allocator, so the backward stays capturable.
    at::Tensor workspace = at::empty({gelu::WorkspaceFloats(a)}, h.options().dtype(at::kFloat));
    a.workspace = workspace.data_ptr<float>();
    const char* error = gelu::Backward(a, at::cuda::getCurrentCUDAStream(h.get_device()));
    TORCH_CHECK(error == nullptr, "MixedLinear GELU backward: ", error);
    return grad_in;
  }
#endif
  at::Tensor grad_in = at::gelu_backward(grad_out, h);
  *bias = BiasGradients(grad_in, outs, into);
  return grad_in;
}

class MixedLinearFn : public torch::autograd::Function<MixedLinearFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, at::TensorList weights,
                            at::TensorList biases, const at::Tensor& shadow_w,
                            const at::Tensor& shadow_b, bool accumulate_into_grad,
                            LinearActivation activation) {
    const at::Tensor xl =
        x.scalar_type() == shadow_w.scalar_type() ? x : x.to(shadow_w.scalar_type());
    const at::Tensor y = at::addmm(shadow_b, xl, shadow_w.t());
    // With accumulate_into_grad the weights and biases themselves are saved, to reach
    // their .grad; with GELU its input, last.
    variable_list saved = {xl, shadow_w};
    if (accumulate_into_grad) {
      saved.insert(saved.end(), weights.begin(), weights.end());
      saved.insert(saved.end(), biases.begin(), biases.end());
    }
    const bool gelu = activation == LinearActivation::kGelu;
    if (gelu) saved.push_back(y);
    ctx->save_for_backward(saved);
    std::vector<int64_t> outs;
    outs.reserve(weights.size());
    for (const at::Tensor& w : weights) outs.push_back(w.size(0));
    ctx->saved_data["outs"] = outs;
    ctx->saved_data["x_float"] = x.scalar_type() == at::kFloat;
    ctx->saved_data["accumulate"] = accumulate_into_grad;
    ctx->saved_data["gelu"] = gelu;
    return gelu ? at::gelu(y) : y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& xl = saved[0];
    const at::Tensor& w = saved[1];
    const std::vector<int64_t> outs = ctx->saved_data["outs"].toIntVector();
    const auto n = static_cast<int64_t>(outs.size());
    const bool accumulate = ctx->saved_data["accumulate"].toBool();
    // Each layer's .grad where it takes the gradient in place (saved[2 + i]: weights,
    // saved[2 + n + i]: biases), else undefined.
    std::vector<at::Tensor> weight_grads(static_cast<size_t>(n)), bias_grads(weight_grads.size());
    if (accumulate) {
      for (int64_t i = 0; i < n; ++i) {
        weight_grads[static_cast<size_t>(i)] = AccumulableGrad(saved[2 + i]);
        bias_grads[static_cast<size_t>(i)] = AccumulableGrad(saved[2 + n + i]);
      }
    }
    // dy: the gradient of the GEMM's output (through GELU's backward when there is one).
    at::Tensor dy = grads[0];
    std::vector<at::Tensor> db;
    if (ctx->saved_data["gelu"].toBool()) {
      dy = GeluBackwardAndBiasGradients(grads[0], saved.back(), outs, bias_grads, &db);
    } else {
      db = BiasGradients(dy, outs, bias_grads);
    }
    variable_list out(static_cast<size_t>(1 + 2 * n + 4));
    if (ctx->needs_input_grad(0)) {
      out[0] = ctx->saved_data["x_float"].toBool() ? MatmulIn(dy, w, at::kFloat) : at::mm(dy, w);
    }
    // A group of several layers (BERT's query, key and value) takes all its weight
    // gradients from one GEMM, then adds each into its .grad buffer: one 768 x 768 gradient
    // per GEMM leaves the GPU's SMs under one wave of output tiles (three such GEMMs ran at
    // 1.8x their floor, 2026-11-29 kernel table). One add per layer, not ATen's
    // multi-tensor add: that one cuts the work into 64K-element chunks, 27 blocks for BERT's
    // three gradients, and moved a quarter of memory speed (0.20 ms a step, 2026-11-30). A
    // single layer's GEMM adds into its buffer itself (beta = 1).
    at::Tensor dw;  // all layers' weight gradients, for those not accumulated by their GEMM
    int64_t offset = 0;
    for (int64_t i = 0; i < n; ++i) {
      at::Tensor& grad = weight_grads[static_cast<size_t>(i)];
      const bool in_place = grad.defined();
      if (in_place && n == 1) {
        // No gradient returned: AccumulateGrad then adds nothing, and its post-hooks (the
        // gradient reducer's) still run, after this GEMM on the same stream.
        AddMatmulFloat(grad, dy.narrow(1, offset, outs[i]).t(), xl);
      } else {
        if (!dw.defined()) dw = MatmulIn(dy.t(), xl, at::kFloat);
        const at::Tensor slice = dw.narrow(0, offset, outs[i]);
        if (in_place) {
          grad.add_(slice);  // likewise nothing returned
        } else {
          out[1 + i] = slice;
        }
      }
      out[1 + n + i] = db[static_cast<size_t>(i)];
      offset += outs[i];
    }
    return out;
  }
};

}  // namespace

at::Tensor ColumnSumFloat(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 2, "ColumnSumFloat: x must be 2-D, got ", x.sizes());
#ifdef RINGPILOT_WITH_CUDA
  if (ColumnSumKernelTakes(x)) {
    const c10::cuda::CUDAGuard guard(x.device());
    namespace cs = column_sum;
    cs::Args a = ColumnSumArgs(x);
    at::Tensor out = at::empty({a.cols}, x.options().dtype(at::kFloat));
    a.out = out.data_ptr<float>();
    // From the caching allocator, so the backward stays capturable.
    const int64_t floats = cs::WorkspaceFloats(a);
    at::Tensor workspace = at::empty({floats}, out.options());
    a.workspace = floats > 0 ? workspace.data_ptr<float>() : nullptr;
    const char* error = cs::ColumnSum(a, at::cuda::getCurrentCUDAStream(x.get_device()));
    TORCH_CHECK(error == nullptr, "ColumnSumFloat: ", error);
    return out;
  }
#endif
  return at::sum(x, {0}, /*keepdim=*/false, at::kFloat);
}

at::Tensor MixedLinear(const at::Tensor& x, at::TensorList weights, at::TensorList biases,
                       const at::Tensor& shadow_w, const at::Tensor& shadow_b,
                       bool accumulate_into_grad, LinearActivation activation) {
  int64_t outputs = 0;
  for (const at::Tensor& w : weights) outputs += w.size(0);
  TORCH_CHECK(activation == LinearActivation::kNone || shadow_w.size(0) == outputs,
              "MixedLinear: an activation on padded outputs (", shadow_w.size(0), " rows for ",
              outputs, " outputs)");
  return MixedLinearFn::apply(x, weights, biases, shadow_w, shadow_b, accumulate_into_grad,
                              activation);
}

int ShadowWeights::AddGroup(std::vector<at::Tensor> weights, std::vector<at::Tensor> biases,
                            ShadowGroupOptions group_options) {
  TORCH_CHECK(!weights.empty() && weights.size() == biases.size(),
              "ShadowWeights::AddGroup: one bias per weight, at least one layer");
  TORCH_CHECK(group_options.pad_outputs_to >= 1,
              "ShadowWeights::AddGroup: pad_outputs_to must be at least 1, got ",
              group_options.pad_outputs_to);
  TORCH_CHECK(shadows_.empty(), "ShadowWeights::AddGroup after the first Refresh");
  const int64_t k = weights.front().size(1);
  for (size_t i = 0; i < weights.size(); ++i) {
    TORCH_CHECK(weights[i].dim() == 2 && weights[i].size(1) == k && biases[i].dim() == 1 &&
                    biases[i].size(0) == weights[i].size(0),
                "ShadowWeights::AddGroup: layer ", i, " has weight ", weights[i].sizes(),
                " and bias ", biases[i].sizes(), " (the group's inputs have ", k, " features)");
  }
  groups_.push_back({std::move(weights), std::move(biases), group_options, {}, {}});
  return static_cast<int>(groups_.size()) - 1;
}

int64_t ShadowWeights::Width(const Group& g) {
  int64_t rows = 0;
  for (const at::Tensor& w : g.weights) rows += w.size(0);
  const int64_t pad = g.options.pad_outputs_to;
  return (rows + pad - 1) / pad * pad;
}

int64_t ShadowWeights::OutputWidth(int group) const {
  return Width(groups_.at(static_cast<size_t>(group)));
}

bool ShadowWeights::Ready(at::ScalarType dtype, const at::Device& device) const {
  return !groups_.empty() && groups_.front().shadow_w.defined() &&
         groups_.front().shadow_w.scalar_type() == dtype &&
         groups_.front().shadow_w.device() == device;
}

// One flat buffer for all weights and one for all biases; a group's layers are adjacent
// in them, so the group's shadow is a plain [N, K] / [N] view. The masters are the
// parameters themselves, not detached aliases: whatever later replaces a parameter's
// storage in place (set_data) is still what Refresh reads.
void ShadowWeights::Allocate(at::ScalarType dtype) {
  // Each group starts on a 256-byte boundary: cuBLAS picks its fast vectorised kernels
  // only for aligned operands (the decoder bias has 30522 elements).
  const int64_t align = 256 / static_cast<int64_t>(c10::elementSize(dtype));
  auto round_up = [&](int64_t n) { return (n + align - 1) / align * align; };
  int64_t weight_numel = 0, bias_numel = 0;
  for (const Group& g : groups_) {
    weight_numel += round_up(Width(g) * g.weights.front().size(1));
    bias_numel += round_up(Width(g));
  }
  const auto options = groups_.front().weights.front().options().dtype(dtype);
  const at::Tensor flat_w = at::empty({weight_numel}, options);
  const at::Tensor flat_b = at::empty({bias_numel}, options);
  masters_.clear();
  shadows_.clear();
  int64_t wo = 0, bo = 0;
  for (Group& g : groups_) {
    const int64_t width = Width(g);
    int64_t rows = 0;
    const int64_t k = g.weights.front().size(1);
    for (size_t i = 0; i < g.weights.size(); ++i) {
      const int64_t n = g.weights[i].size(0);
      masters_.push_back(g.weights[i]);
      shadows_.push_back(flat_w.narrow(0, wo + rows * k, n * k).view({n, k}));
      masters_.push_back(g.biases[i]);
      shadows_.push_back(flat_b.narrow(0, bo + rows, n));
      rows += n;
    }
    g.shadow_w = flat_w.narrow(0, wo, width * k).view({width, k});
    g.shadow_b = flat_b.narrow(0, bo, width);
    if (width > rows) {
      // The padding is no master's: written once here, never by Refresh.
      const at::NoGradGuard no_grad;
      g.shadow_w.narrow(0, rows, width - rows).zero_();
      g.shadow_b.narrow(0, rows, width - rows).fill_(-std::numeric_limits<float>::infinity());
    }
    wo += round_up(width * k);
    bo += round_up(width);
  }
}

void ShadowWeights::Refresh(at::ScalarType dtype) {
  TORCH_CHECK(!groups_.empty(), "ShadowWeights::Refresh without layers");
  const bool ready = Ready(dtype, groups_.front().weights.front().device());
  TORCH_CHECK(ready || !handed_over_, "ShadowWeights::Refresh: the shadows were handed over as ",
              shadows_.front().scalar_type(), " on ", shadows_.front().device(),
              "; they cannot become ", dtype);
  if (!ready) Allocate(dtype);
  if (handed_over_) return;
  const at::NoGradGuard no_grad;
  at::_foreach_copy_(shadows_, masters_);
}

at::Tensor ShadowWeights::ShadowOf(const at::Tensor& master) const {
  for (size_t i = 0; i < masters_.size(); ++i) {
    if (masters_[i].is_same(master)) return shadows_[i];
  }
  return {};
}

void ShadowWeights::HandOverRefresh() {
  TORCH_CHECK(!shadows_.empty(), "ShadowWeights::HandOverRefresh before the first Refresh");
  handed_over_ = true;
}

at::Tensor ShadowWeights::Forward(int group, const at::Tensor& x,
                                  LinearActivation activation) const {
  const Group& g = groups_.at(static_cast<size_t>(group));
  return MixedLinear(x, g.weights, g.biases, g.shadow_w, g.shadow_b, options_.accumulate_into_grad,
                     activation);
}

}  // namespace ringpilot::trainer::ops
