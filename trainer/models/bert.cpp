// BertForMaskedLM with Hugging Face's maths (post-LayerNorm, exact GELU, MLM head with
// decoder tied to the word embeddings) and SDPA attention. The batch names the masked
// positions (a fixed count per row), so the MLM head runs on those rows only: the loss is the one
// BertForMaskedLM computes with -100 labels elsewhere, without the wasted logits.
#include "trainer/models/bert.h"

#include <cmath>

#include <ATen/autocast_mode.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "trainer/ops/embedding.h"
#include "trainer/ops/fast_dropout.h"
#include "trainer/ops/layer_norm.h"
#include "trainer/ops/linear_cross_entropy.h"
#include "trainer/ops/mixed_linear.h"
#include "trainer/ops/residual_norm.h"

namespace ringpilot::trainer::models {

namespace {

namespace nn = torch::nn;

nn::LayerNorm Norm(int h, double eps) { return nn::LayerNorm(nn::LayerNormOptions({h}).eps(eps)); }

// With MixedLinear (`mixed`), LayerNorm's parameter gradients by ringpilot's kernel too.
at::Tensor ApplyNorm(nn::LayerNorm& norm, const at::Tensor& x, const ops::ShadowWeights* mixed) {
  return mixed != nullptr ? ops::LayerNorm(x, norm->weight, norm->bias, norm->options.eps())
                          : norm(x);
}

// `layer`, or its group `group` of `mixed` (MixedLinear) when there is one.
at::Tensor ApplyLinear(nn::Linear& layer, int group, const at::Tensor& x,
                       const ops::ShadowWeights* mixed) {
  return mixed != nullptr ? mixed->Forward(group, x) : layer(x);
}

// gelu(ApplyLinear(...)): with `mixed`, GELU inside MixedLinear (its backward also makes the
// bias gradient in the same pass).
at::Tensor ApplyLinearGelu(nn::Linear& layer, int group, const at::Tensor& x,
                           const ops::ShadowWeights* mixed) {
  return mixed != nullptr ? mixed->Forward(group, x, ops::LinearActivation::kGelu)
                          : at::gelu(layer(x));
}

// A layer's activations: float32 `x` (the residual stream) and, with the fused residual
// blocks, `low`: x already in the autocast dtype for the next linear layer.
struct Hidden {
  at::Tensor x, low;
};

struct LayerImpl : nn::Module {
  explicit LayerImpl(const BertConfig& c)
      : heads(c.heads), dropout_p(c.dropout), accumulate(c.mixed_linear_accumulate) {
    query = register_module("query", nn::Linear(c.hidden, c.hidden));
    key = register_module("key", nn::Linear(c.hidden, c.hidden));
    value = register_module("value", nn::Linear(c.hidden, c.hidden));
    attn_out = register_module("attn_out", nn::Linear(c.hidden, c.hidden));
    attn_norm = register_module("attn_norm", Norm(c.hidden, c.layer_norm_eps));
    inter = register_module("intermediate", nn::Linear(c.hidden, c.intermediate));
    out = register_module("output", nn::Linear(c.intermediate, c.hidden));
    out_norm = register_module("output_norm", Norm(c.hidden, c.layer_norm_eps));
  }

  // x: [B, L, H]. The linear layers see [B*L, H] rows: a 2-D input lets at::linear
  // fold the bias into the GEMM (addmm epilogue); a 3-D one costs a separate
  // broadcast add per layer (a third of BERT-base's elementwise time on an H200).
  // Low-precision training on CUDA: the layers run through `mixed` (MixedLinear), with
  // query, key and value as one GEMM; otherwise through at::linear.
  void AddGroups(ops::ShadowWeights& mixed) {
    qkv_group = mixed.AddGroup({query->weight, key->weight, value->weight},
                               {query->bias, key->bias, value->bias});
    attn_out_group = mixed.AddGroup({attn_out->weight}, {attn_out->bias});
    inter_group = mixed.AddGroup({inter->weight}, {inter->bias});
    out_group = mixed.AddGroup({out->weight}, {out->bias});
  }

  // x: [B, L, H]. With `in.low` (fused residual blocks, needs `mixed`) the linear layers
  // take it and each block's dropout + add + LayerNorm is ResidualLayerNorm.
  Hidden forward(const Hidden& in, const ops::ShadowWeights* mixed) {
    const at::Tensor& x = in.x;
    const int64_t b = x.size(0), l = x.size(1), h = x.size(2), d = h / heads;
    const at::Tensor rows = x.reshape({b * l, h});
    const bool fused = in.low.defined() && mixed != nullptr;
    auto split = [&](const at::Tensor& t) { return t.view({b, l, heads, d}).transpose(1, 2); };
    const double p = is_training() ? dropout_p : 0.0;
    at::Tensor q, k, v;
    if (mixed != nullptr) {
      const std::vector<at::Tensor> qkv =
          mixed->Forward(qkv_group, fused ? in.low.reshape({b * l, h}) : rows).split(h, 1);
      q = split(qkv[0]), k = split(qkv[1]), v = split(qkv[2]);
    } else {
      q = split(query(rows)), k = split(key(rows)), v = split(value(rows));
    }
    at::Tensor ctx;
    if (p > 0 && rows.is_cpu()) {
      // SDPA's CPU math path, with our dropout masks instead of its Bernoulli draws.
      at::Tensor scores = at::matmul(q, k.transpose(-2, -1)).mul_(1.0 / std::sqrt(double(d)));
      ctx = at::matmul(ops::Dropout(at::softmax(scores, -1), p), v);
    } else {
      ctx = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, p);
    }
    ctx = ctx.transpose(1, 2).reshape({b * l, h});
    if (fused) {
      const ops::ResidualNorm a =
          ops::ResidualLayerNorm(mixed->Forward(attn_out_group, ctx), rows, attn_norm->weight,
                                 attn_norm->bias, attn_norm->options.eps(), p, accumulate);
      const at::Tensor f = mixed->Forward(
          out_group, mixed->Forward(inter_group, a.out_low, ops::LinearActivation::kGelu));
      const ops::ResidualNorm o = ops::ResidualLayerNorm(f, a.out, out_norm->weight, out_norm->bias,
                                                         out_norm->options.eps(), p, accumulate);
      return {o.out.view({b, l, h}), o.out_low.view({b, l, h})};
    }
    at::Tensor a =
        ApplyNorm(attn_norm,
                  ops::Dropout(ApplyLinear(attn_out, attn_out_group, ctx, mixed), p) + rows, mixed);
    at::Tensor f =
        ApplyLinear(out, out_group, ApplyLinearGelu(inter, inter_group, a, mixed), mixed);
    return {ApplyNorm(out_norm, ops::Dropout(f, p) + a, mixed).view({b, l, h}), {}};
  }

  int64_t heads;
  double dropout_p;
  bool accumulate;
  int qkv_group = -1, attn_out_group = -1, inter_group = -1, out_group = -1;
  nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, attn_out{nullptr};
  nn::Linear inter{nullptr}, out{nullptr};
  nn::LayerNorm attn_norm{nullptr}, out_norm{nullptr};
};
TORCH_MODULE(Layer);

class Bert : public Model {
 public:
  explicit Bert(const BertConfig& c)
      : cfg_(c), shadows_(ops::ShadowWeightsOptions{c.mixed_linear_accumulate}) {
    word = register_module("word_embeddings", nn::Embedding(c.vocab, c.hidden));
    position = register_module("position_embeddings", nn::Embedding(c.max_positions, c.hidden));
    token_type = register_module("token_type_embeddings", nn::Embedding(2, c.hidden));
    emb_norm = register_module("embeddings_norm", Norm(c.hidden, c.layer_norm_eps));
    encoder = register_module("encoder", nn::ModuleList());
    for (int i = 0; i < c.layers; ++i) encoder->push_back(Layer(c));
    head_transform = register_module("head_transform", nn::Linear(c.hidden, c.hidden));
    head_norm = register_module("head_norm", Norm(c.hidden, c.layer_norm_eps));
    decoder_bias = register_parameter("decoder_bias", torch::zeros({c.vocab}));
    // Hugging Face's initialisation: N(0, 0.02) weights, zero biases, LayerNorm (1, 0).
    torch::NoGradGuard no_grad;
    for (auto& p : named_parameters()) {
      const auto& name = p.key();
      if (name.find("norm") != std::string::npos) {
        if (name.size() >= 6 && name.compare(name.size() - 6, 6, "weight") == 0) {
          p.value().fill_(1.0);
        } else {
          p.value().zero_();
        }
      } else if (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0) {
        p.value().zero_();
      } else {
        p.value().normal_(0.0, 0.02);
      }
    }
    for (auto& layer : *encoder) layer->as<Layer>()->AddGroups(shadows_);
    head_group_ = shadows_.AddGroup({head_transform->weight}, {head_transform->bias});
    // The decoder's logits padded to a multiple of 64 words (30522 -> 30528), -inf past
    // the vocabulary: rows of 30522 bf16 logits are not 16-byte aligned, and cuBLAS then
    // runs the decoder's three GEMMs (forward, both gradients) on its slower non-TMA
    // kernels (cutlass::Kernel2: 0.83 ms of the 15.7 ms step in the kernel table of
    // 2026-11-29, 3.6x its floor). The softmax, loss and gradients are unchanged.
    ops::ShadowGroupOptions decoder_layout;
    decoder_layout.pad_outputs_to = 64;
    decoder_group_ = shadows_.AddGroup({word->weight}, {decoder_bias}, decoder_layout);
  }

  InputKind input_kind() const override { return InputKind::kTokens; }
  TokenSpec token_spec() const override {
    TokenSpec s;
    s.vocab = cfg_.vocab;
    s.seq_len = cfg_.seq_len;
    return s;
  }

  at::Tensor Encode(const at::Tensor& ids, const ops::ShadowWeights* mixed) {
    const int64_t l = ids.size(1);
    at::Tensor pos = at::arange(l, ids.options());
    // Under the mixed path the word embeddings' gradient rows go into .grad directly, as
    // MixedLinear's do (ops/embedding.h).
    at::Tensor x =
        ops::EmbeddingLookup(word->weight, ids, mixed != nullptr && cfg_.mixed_linear_accumulate) +
        position(pos).unsqueeze(0) + token_type->weight[0];
    Hidden hidden{ops::Dropout(ApplyNorm(emb_norm, x, mixed), is_training() ? cfg_.dropout : 0.0),
                  {}};
    if (mixed != nullptr && cfg_.fused_residual_norm) {
      hidden.low = hidden.x.to(at::autocast::get_autocast_dtype(at::kCUDA));
    }
    for (auto& layer : *encoder) hidden = layer->as<Layer>()->forward(hidden, mixed);
    return hidden.x;
  }

  // The MLM head at every position, float32 and without MixedLinear's shadows.
  at::Tensor Logits(const at::Tensor& ids) override {
    const at::Tensor hidden = Encode(ids, nullptr);
    const at::Tensor t = ApplyNorm(
        head_norm, ApplyLinearGelu(head_transform, head_group_, hidden, nullptr), nullptr);
    return at::linear(t, word->weight, decoder_bias);
  }

  std::vector<at::Tensor> HandOverLowPrecisionCopies(
      const std::vector<at::Tensor>& params) override {
    if (!cfg_.mixed_linear || !shadows_.Allocated()) return {};
    std::vector<at::Tensor> copies;
    copies.reserve(params.size());
    for (const at::Tensor& p : params) copies.push_back(shadows_.ShadowOf(p));
    shadows_.HandOverRefresh();
    return copies;
  }

  // target: int64 [B, L] with -100 at unmasked positions, and exactly the same number
  // of masked positions in every row (synthetic data and trainer/input/mlm_masking.h guarantee
  // it), so the rows to score are found without a host synchronisation.
  at::Tensor Loss(const at::Tensor& ids, const at::Tensor& target) override {
    // Under CUDA autocast the linear layers use low-precision shadows of the weights,
    // refreshed here once per forward (the optimizer changed the masters since).
    const ops::ShadowWeights* mixed = nullptr;
    if (cfg_.mixed_linear && ids.is_cuda() && at::autocast::is_autocast_enabled(at::kCUDA)) {
      shadows_.Refresh(at::autocast::get_autocast_dtype(at::kCUDA));
      mixed = &shadows_;
    }
    const MaskedRows m = HeadRows(Encode(ids, mixed), target, mixed);
    // float32 (CPU; CUDA without autocast): logits, softmax and their gradient in one
    // buffer. Under bf16 autocast the decoder GEMM runs in bf16 (MixedLinear's logits are
    // padded with -inf columns to an aligned width) and the loss in float32.
    if (m.rows.scalar_type() == at::kFloat &&
        !at::autocast::is_autocast_enabled(m.rows.device().type())) {
      return ops::LinearCrossEntropy(m.rows, word->weight, decoder_bias, m.labels);
    }
    const at::Tensor logits = mixed != nullptr ? mixed->Forward(decoder_group_, m.rows)
                                               : at::linear(m.rows, word->weight, decoder_bias);
    return ops::CrossEntropyFloat(logits, m.labels);
  }

  MlmScores ScoreMasked(const at::Tensor& ids, const at::Tensor& target) override {
    const MaskedRows m = HeadRows(Encode(ids, nullptr), target, nullptr);
    const at::Tensor logits = at::linear(m.rows, word->weight, decoder_bias).to(at::kFloat);
    MlmScores s;
    s.loss_sum = at::cross_entropy_loss(logits, m.labels, {}, at::Reduction::Sum).to(at::kDouble);
    s.correct = logits.argmax(1).eq(m.labels).sum().to(at::kDouble);
    s.count = m.labels.numel();
    return s;
  }

 private:
  struct MaskedRows {
    at::Tensor rows;    ///< [B x masked_per_row, H]: the MLM head's transform of them
    at::Tensor labels;  ///< [B x masked_per_row]
  };

  // The masked positions of every row (a stable descending sort puts them first, in
  // position order) through the MLM head's transform.
  MaskedRows HeadRows(const at::Tensor& hidden, const at::Tensor& target,
                      const ops::ShadowWeights* mixed) {
    const int64_t b = hidden.size(0), h = hidden.size(2);
    const int64_t m = token_spec().masked_per_row();
    at::Tensor masked = target.ne(TokenSpec::kIgnore);
    at::Tensor pos =
        std::get<1>(masked.to(at::kByte).sort(/*stable=*/true, 1, true)).narrow(1, 0, m);
    at::Tensor rows = hidden.gather(1, pos.unsqueeze(-1).expand({b, m, h})).reshape({b * m, h});
    MaskedRows out;
    out.labels = target.gather(1, pos).reshape({b * m});
    out.rows =
        ApplyNorm(head_norm, ApplyLinearGelu(head_transform, head_group_, rows, mixed), mixed);
    return out;
  }

  BertConfig cfg_;
  nn::Embedding word{nullptr}, position{nullptr}, token_type{nullptr};
  nn::LayerNorm emb_norm{nullptr}, head_norm{nullptr};
  nn::ModuleList encoder{nullptr};
  nn::Linear head_transform{nullptr};
  at::Tensor decoder_bias;
  ops::ShadowWeights shadows_;
  int head_group_ = -1, decoder_group_ = -1;
};

}  // namespace

std::shared_ptr<Model> MakeBert(const BertConfig& cfg) { return std::make_shared<Bert>(cfg); }

}  // namespace ringpilot::trainer::models
