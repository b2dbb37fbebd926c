#include "trainer/ops/linear_cross_entropy.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <torch/autograd.h>

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "trainer/ops/cross_entropy_kernels.h"
#include "trainer/ops/tensor_element_type.h"
#endif

namespace ringpilot::trainer::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Loss and the gradients of x, weight and bias.
using LossAndGrads = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// The whole [N, V] logits at once (CUDA, where the GEMMs are not the problem).
LossAndGrads WholeVocabulary(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             const at::Tensor& labels) {
  const int64_t n = x.size(0);
  at::Tensor logits = at::addmm(bias, x, weight.t());  // [N, V]
  at::Tensor target = labels.unsqueeze(1);
  at::Tensor picked = logits.gather(1, target);  // [N, 1]
  at::Tensor max = std::get<0>(logits.max(1, /*keepdim=*/true));
  // In place from here on: logits -> exp(logits - max) -> softmax / N - onehot / N,
  // which is d(mean loss)/d(logits).
  logits.sub_(max).exp_();
  at::Tensor sum = logits.sum(1, /*keepdim=*/true);
  at::Tensor loss = (sum.log() + max - picked).mean();
  logits.div_(sum * static_cast<double>(n));
  logits.scatter_add_(1, target, at::full_like(picked, -1.0 / static_cast<double>(n)));
  return {loss, at::mm(logits, weight), at::mm(logits.t(), x), logits.sum(0)};
}

// The CPU path: one [N, V] GEMM writes 37 MB of logits (bert-tiny, batch 16) that every
// later pass reads back from memory, and MKL runs that shape at half its rate (47 vs 27 ms
// in chunks). Per chunk of columns instead: GEMM, chunk max, exp and row sums while the
// chunk is in cache (the softmax over the whole row is put together from the per-chunk
// maxima and sums); then per chunk again: scale to the gradient and feed the x and weight
// GEMMs. The chunks live chunk-major in one buffer, each contiguous.
LossAndGrads ChunkedVocabulary(const at::Tensor& x, const at::Tensor& weight,
                               const at::Tensor& bias, const at::Tensor& labels, int64_t chunk) {
  const int64_t n = x.size(0), v = weight.size(0);
  const int64_t chunks = (v + chunk - 1) / chunk;
  const at::Tensor lab = labels.contiguous();
  const int64_t* lab_p = lab.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> rows_of_chunk(chunks);  // rows whose label is in the chunk
  for (int64_t r = 0; r < n; ++r) {
    if (lab_p[r] < 0 || lab_p[r] >= v) {
      throw std::invalid_argument("LinearCrossEntropy: label " + std::to_string(lab_p[r]) +
                                  " of row " + std::to_string(r) + " is outside [0, " +
                                  std::to_string(v) + ")");
    }
    rows_of_chunk[lab_p[r] / chunk].push_back(r);
  }
  const at::Tensor xc = x.contiguous();
  at::Tensor buf = at::empty({n * v}, x.options());
  at::Tensor chunk_max = at::empty({chunks, n}, x.options());
  at::Tensor chunk_sum = at::empty({chunks, n}, x.options());
  at::Tensor picked = at::empty({n}, x.options());
  float* picked_p = picked.data_ptr<float>();
  auto block = [&](int64_t c) {
    const int64_t width = std::min(chunk, v - c * chunk);
    return buf.narrow(0, c * chunk * n, n * width).view({n, width});
  };
  for (int64_t c = 0; c < chunks; ++c) {
    at::Tensor l = block(c);
    const int64_t c0 = c * chunk, width = l.size(1);
    at::addmm_out(l, bias.narrow(0, c0, width), xc, weight.narrow(0, c0, width).t());
    const float* lp = l.data_ptr<float>();
    for (int64_t r : rows_of_chunk[c]) picked_p[r] = lp[r * width + (lab_p[r] - c0)];
    at::Tensor m = chunk_max.select(0, c);
    at::amax_out(m, l, {1});
    l.sub_(m.unsqueeze(1)).exp_();
    at::Tensor sums = chunk_sum.select(0, c);
    at::sum_out(sums, l, {1});
  }
  at::Tensor max = chunk_max.amax(0);             // [N]
  at::Tensor rescale = (chunk_max - max).exp_();  // exp(m_chunk - m), [chunks, N]
  at::Tensor sum = (chunk_sum * rescale).sum(0);  // [N]
  at::Tensor loss = (sum.log() + max - picked).mean();
  // d(mean loss)/d(logits) = exp(l - m_chunk) * exp(m_chunk - m) / (sum * N) - onehot / N.
  at::Tensor factor = rescale.div_(sum * static_cast<double>(n));
  const float minus_inv_n = static_cast<float>(-1.0 / static_cast<double>(n));
  at::Tensor grad_x = at::zeros({n, x.size(1)}, x.options());
  at::Tensor grad_w = at::empty_like(weight, at::MemoryFormat::Contiguous);
  at::Tensor grad_b = at::empty_like(bias, at::MemoryFormat::Contiguous);
  for (int64_t c = 0; c < chunks; ++c) {
    at::Tensor g = block(c);
    const int64_t c0 = c * chunk, width = g.size(1);
    g.mul_(factor.select(0, c).unsqueeze(1));
    float* gp = g.data_ptr<float>();
    for (int64_t r : rows_of_chunk[c]) gp[r * width + (lab_p[r] - c0)] += minus_inv_n;
    grad_x.addmm_(g, weight.narrow(0, c0, width));
    at::Tensor w_rows = grad_w.narrow(0, c0, width);
    at::Tensor b_rows = grad_b.narrow(0, c0, width);
    at::mm_out(w_rows, g.t(), xc);
    at::sum_out(b_rows, g, {0});
  }
  return {loss, grad_x, grad_w, grad_b};
}

int64_t CpuChunkColumns(const LinearCrossEntropyOptions& options, int64_t rows) {
  if (options.cpu_chunk_columns > 0) return options.cpu_chunk_columns;
  const int64_t fit = LinearCrossEntropyOptions::kCpuChunkBytes /
                      (static_cast<int64_t>(sizeof(float)) * std::max<int64_t>(rows, 1));
  return std::max(LinearCrossEntropyOptions::kMinCpuChunkColumns, fit / 64 * 64);
}

struct LinearCrossEntropyFunction : torch::autograd::Function<LinearCrossEntropyFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, const at::Tensor& labels, int64_t chunk) {
    auto [loss, grad_x, grad_w, grad_b] = x.is_cpu()
                                              ? ChunkedVocabulary(x, weight, bias, labels, chunk)
                                              : WholeVocabulary(x, weight, bias, labels);
    ctx->save_for_backward({grad_x, grad_w, grad_b});
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor& g = grad_out[0];  // scalar: d(total)/d(loss)
    // loss.backward() seeds 1: on the CPU (where reading it costs nothing) hand the saved
    // gradients over instead of a full pass that multiplies the weight's by one.
    if (g.is_cpu() && g.item<double>() == 1.0) {
      return {saved[0], saved[1], saved[2], at::Tensor(), at::Tensor()};
    }
    return {saved[0] * g, saved[1] * g, saved[2] * g, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor LinearCrossEntropy(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                              const at::Tensor& labels, const LinearCrossEntropyOptions& options) {
  if (x.dim() != 2 || weight.dim() != 2 || bias.dim() != 1 || labels.dim() != 1 ||
      x.size(1) != weight.size(1) || bias.size(0) != weight.size(0) ||
      labels.size(0) != x.size(0) || x.size(0) == 0) {
    throw std::invalid_argument(
        "LinearCrossEntropy: expects x [N>0, K], weight [V, K], bias [V], labels [N]");
  }
  if (x.scalar_type() != at::kFloat || weight.scalar_type() != at::kFloat ||
      bias.scalar_type() != at::kFloat || labels.scalar_type() != at::kLong) {
    throw std::invalid_argument("LinearCrossEntropy: float32 inputs and int64 labels only");
  }
  if (options.cpu_chunk_columns < 0) {
    throw std::invalid_argument("LinearCrossEntropy: cpu_chunk_columns must be >= 0");
  }
  return LinearCrossEntropyFunction::apply(x, weight, bias, labels,
                                           CpuChunkColumns(options, x.size(0)));
}

#ifdef RINGPILOT_WITH_CUDA
namespace {

namespace ce = cross_entropy;

bool CrossEntropyKernelApplies(const at::Tensor& logits, const at::Tensor& labels) {
  const auto dtype = logits.scalar_type();
  return logits.is_cuda() && (dtype == at::kBFloat16 || dtype == at::kHalf) && logits.dim() == 2 &&
         logits.size(0) > 0 && logits.size(1) > 0 && logits.size(0) <= INT32_MAX &&
         logits.stride(1) == 1 && logits.stride(0) >= logits.size(1) &&
         labels.scalar_type() == at::kLong && labels.dim() == 1 &&
         labels.size(0) == logits.size(0) && labels.device() == logits.device();
}

// The fields ForwardArgs and BackwardArgs share: the logits' pointer, type and layout, and
// the labels (contiguous int64).
template <typename Args>
void SetLogitsAndLabels(const at::Tensor& logits, const at::Tensor& labels, Args* a) {
  a->logits = logits.data_ptr();
  a->dtype = ElementTypeOf(logits.scalar_type());
  a->rows = logits.size(0);
  a->cols = logits.size(1);
  a->ld = logits.stride(0);
  a->labels = labels.data_ptr<int64_t>();
}

// Saves the logits as they are (no copy), the labels, and per row its log-sum-exp.
class CrossEntropyLowPrecisionFn : public torch::autograd::Function<CrossEntropyLowPrecisionFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& labels_in) {
    const c10::cuda::CUDAGuard guard(logits.device());
    const at::Tensor labels = labels_in.contiguous();
    const at::TensorOptions f32 = logits.options().dtype(at::kFloat);
    at::Tensor lse = at::empty({logits.size(0)}, f32);
    at::Tensor row_loss = at::empty({logits.size(0)}, f32);
    at::Tensor loss = at::empty({}, f32);
    at::Tensor count = at::empty({}, f32);
    ce::ForwardArgs a;
    SetLogitsAndLabels(logits, labels, &a);
    a.lse = lse.data_ptr<float>();
    a.row_loss = row_loss.data_ptr<float>();
    a.loss = loss.data_ptr<float>();
    a.count = count.data_ptr<float>();
    const char* error = ce::Forward(a, at::cuda::getCurrentCUDAStream(logits.get_device()));
    TORCH_CHECK(error == nullptr, "CrossEntropyFloat: ", error);
    ctx->save_for_backward({logits, labels, lse, count});
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& logits = saved[0];
    const c10::cuda::CUDAGuard guard(logits.device());
    const at::Tensor grad_loss = grads[0].to(at::kFloat).contiguous();
    at::Tensor grad = at::empty(logits.sizes(), logits.options());
    ce::BackwardArgs a;
    SetLogitsAndLabels(logits, saved[1], &a);
    a.lse = saved[2].data_ptr<float>();
    a.count = saved[3].data_ptr<float>();
    a.grad_loss = grad_loss.data_ptr<float>();
    a.grad_logits = grad.data_ptr();
    const char* error = ce::Backward(a, at::cuda::getCurrentCUDAStream(logits.get_device()));
    TORCH_CHECK(error == nullptr, "CrossEntropyFloat: ", error);
    return {grad, at::Tensor()};
  }
};

}  // namespace
#endif

at::Tensor CrossEntropyFloat(const at::Tensor& logits, const at::Tensor& labels) {
#ifdef RINGPILOT_WITH_CUDA
  if (CrossEntropyKernelApplies(logits, labels)) {
    return CrossEntropyLowPrecisionFn::apply(logits, labels);
  }
#endif
  // An explicit dtype: autocast's log_softmax rule (float32 unless a dtype is given) and
  // nll_loss's (float32 inputs) then insert no casts either.
  return at::nll_loss(at::log_softmax(logits, 1, at::kFloat), labels);
}

}  // namespace ringpilot::trainer::ops
