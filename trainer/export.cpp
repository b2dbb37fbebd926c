#include "trainer/export.h"

#include <cstdio>
#include <map>
#include <optional>
#include <stdexcept>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "config/job.h"
#include "data/token_shards.h"
#include "trainer/checkpoint/safetensors.h"
#include "trainer/checkpoint/store.h"
#include "trainer/input/dataset_factory.h"
#include "trainer/models/reference_weights.h"
#include "trainer/options.h"

namespace ringpilot::trainer {
namespace {

// The reference input: two samples, from a fixed seed (any input will do to compare two
// implementations of the same function).
constexpr int64_t kReferenceBatch = 2;
constexpr int64_t kReferenceTokens = 16;
constexpr uint64_t kReferenceSeed = 1234;

std::string StepDirName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%08lld", static_cast<long long>(step));
  return buf;
}

// The asked-for step, or the newest checkpoint that verifies (read-only: unlike resume,
// export moves no corrupt checkpoint aside).
checkpoint::CheckpointInfo ChooseCheckpoint(const checkpoint::CheckpointStore& store,
                                            int64_t step) {
  if (step > 0) return checkpoint::CheckpointStore::Verify(store.dir() + "/" + StepDirName(step));
  const std::vector<std::string> paths = store.StepPaths();
  std::string problems;
  for (auto it = paths.rbegin(); it != paths.rend(); ++it) {
    try {
      return checkpoint::CheckpointStore::Verify(*it);
    } catch (const checkpoint::CheckpointError& e) {
      problems += std::string(problems.empty() ? " (" : "; ") + e.what();
    }
  }
  throw checkpoint::CheckpointError(store.dir() + ": no valid checkpoint" +
                                    (problems.empty() ? "" : problems + ")"));
}

// The text of the token `id` in a tokenizer.json: an added token's content, else its
// model's vocabulary entry (Unigram: [piece, score] list; WordPiece/BPE: token -> id).
std::string TokenText(const nlohmann::json& tokenizer, int64_t id) {
  for (const auto& t : tokenizer.value("added_tokens", nlohmann::json::array())) {
    if (t.value("id", int64_t{-1}) == id) return t.value("content", "");
  }
  const nlohmann::json& vocab = tokenizer["model"]["vocab"];
  if (vocab.is_array() && id >= 0 && id < static_cast<int64_t>(vocab.size())) {
    return vocab[id][0].get<std::string>();
  }
  if (vocab.is_object()) {
    for (const auto& [token, token_id] : vocab.items()) {
      if (token_id.get<int64_t>() == id) return token;
    }
  }
  return "";
}

// BERT trained on token shards: PREFIX.tokenizer.json (`ringpilot data tokenize`) beside the
// weights, with the configuration transformers reads to name the special tokens. Returns
// the tokenizer.json written, or "" with `why` set.
std::string ExportTokenizer(const config::JobConfig& job, const models::TokenSpec& tokens,
                            const std::string& folder, std::string* why) {
  if (job.data.kind != config::DataKind::kTokens) {
    *why = "synthetic token ids have no tokenizer";
    return "";
  }
  const std::string source = data::TokenizerFilePath(job.data.train);
  if (!base::Exists(source)) {
    *why = source +
           " is missing (tokenise the text again with `ringpilot data tokenize`, "
           "which writes it)";
    return "";
  }
  const std::string text = base::ReadFile(source);
  const nlohmann::json tokenizer = nlohmann::json::parse(text, nullptr, false);
  if (tokenizer.is_discarded() || !tokenizer.contains("model")) {
    throw std::runtime_error(source + ": not a Hugging Face tokenizer.json");
  }
  nlohmann::ordered_json special;
  const std::pair<const char*, int64_t> ids[] = {{"cls_token", tokens.cls},
                                                 {"sep_token", tokens.sep},
                                                 {"mask_token", tokens.mask},
                                                 {"pad_token", tokens.pad}};
  for (const auto& [key, id] : ids) {
    const std::string token = TokenText(tokenizer, id);
    if (token.empty()) {
      throw std::runtime_error(source + ": no token with id " + std::to_string(id) + " (the " +
                               key + " of " + data::TokenFilePath(job.data.train) +
                               "): not the shards' tokenizer");
    }
    special[key] = token;
  }
  const nlohmann::json& model = tokenizer["model"];
  if (model.contains("unk_id") && model["unk_id"].is_number_integer()) {
    special["unk_token"] = TokenText(tokenizer, model["unk_id"].get<int64_t>());
  } else if (model.contains("unk_token") && model["unk_token"].is_string()) {
    special["unk_token"] = model["unk_token"];
  }
  // The generic fast tokenizer: tokenizer.json holds the normalizer and the [CLS] ... [SEP]
  // template (BertTokenizerFast would replace a SentencePiece normalizer with BERT's own).
  nlohmann::ordered_json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                                   {"model_max_length", job.model.seq_len}};
  for (const auto& [key, value] : special.items()) config[key] = value;
  const std::string out = folder + "/tokenizer.json";
  base::WriteFileAtomically(out, text);
  base::WriteFileAtomically(folder + "/tokenizer_config.json", config.dump(2) + "\n");
  base::WriteFileAtomically(folder + "/special_tokens_map.json", special.dump(2) + "\n");
  return out;
}

}  // namespace

ExportResult ExportCheckpoint(const ExportOptions& options) {
  const std::string job_path = options.run_dir + "/job.yaml";
  const config::JobConfig job = config::LoadJobConfig(job_path);
  // model.vocab_size 0 follows the data, as in Trainer::Run's plan (token shards: their
  // header, so data.train must be readable; synthetic: BERT's WordPiece size).
  std::optional<models::TokenSpec> run_tokens;
  if (!config::IsImageModel(job.model.name)) run_tokens = input::TokenSpecFor(InputOptionsFor(job));
  const models::TokenSpec tokens = run_tokens.value_or(models::TokenSpec{});
  const checkpoint::CheckpointStore store(options.run_dir + "/checkpoints", job.checkpoint.keep);
  const checkpoint::CheckpointInfo info = ChooseCheckpoint(store, options.step);

  // The model on the CPU, as the checkpoint's ranks built it (a plain BatchNorm stands in
  // for a synchronised one: same parameters and buffers).
  const models::ModelOptions model_options = ModelOptionsFor(job, run_tokens);
  const std::shared_ptr<models::Model> model = models::MakeModel(model_options, nullptr);
  std::vector<checkpoint::NamedTensor> named;
  for (auto& p : model->named_parameters()) named.push_back({"model/" + p.key(), p.value()});
  for (auto& b : model->named_buffers()) named.push_back({"model/" + b.key(), b.value()});
  store.Load(info, named);

  const models::ReferenceWeights weights =
      models::ToReferenceWeights(model_options, *model, tokens.pad);
  ExportResult r;
  r.step = info.step;
  r.checkpoint = info.path;
  r.library = weights.library;
  r.architecture = weights.architecture;
  r.tensors = static_cast<int64_t>(weights.tensors.size());
  r.weights = options.out.empty()
                  ? options.run_dir + "/export/" + StepDirName(info.step) + "/model.safetensors"
                  : options.out;
  const std::string folder = base::DirName(r.weights);
  base::MakeDirs(folder);
  std::vector<checkpoint::NamedTensor> out;
  for (const auto& [name, tensor] : weights.tensors) out.push_back({name, tensor});
  // "format: pt" is what transformers' from_pretrained asks of a safetensors file.
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"ringpilot_model", config::ToString(job.model.name)},
      {"ringpilot_step", std::to_string(info.step)},
      {"reference", weights.library + " " + weights.architecture},
  };
  checkpoint::WriteSafetensors(r.weights, out, metadata);
  if (!weights.config_json.empty()) {
    r.config = folder + "/config.json";
    base::WriteFileAtomically(r.config, weights.config_json);
    r.tokenizer = ExportTokenizer(job, tokens, folder, &r.no_tokenizer);
  }

  if (!options.reference.empty()) {
    torch::NoGradGuard no_grad;
    torch::manual_seed(kReferenceSeed);
    model->eval();
    at::Tensor input;
    if (model->input_kind() == models::InputKind::kImages) {
      const models::ImageSpec spec = model->image_spec();
      input = torch::randn({kReferenceBatch, 3, spec.height, spec.width});
    } else {
      const int64_t tokens = std::min<int64_t>(kReferenceTokens, model->token_spec().seq_len);
      input = torch::randint(model->token_spec().vocab, {kReferenceBatch, tokens}, at::kLong);
    }
    const at::Tensor output = model->Logits(input);
    r.reference = options.reference;
    base::MakeDirs(base::DirName(r.reference));
    checkpoint::WriteSafetensors(r.reference, {{"input", input}, {"output", output}}, metadata);
  }
  return r;
}

}  // namespace ringpilot::trainer
