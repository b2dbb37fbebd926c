// `ringpilot export RUN_DIR`: a checkpoint's model weights as a safetensors file under the
// names of the implementation each model follows (trainer/models/reference_weights.h), with
// Hugging Face's config.json beside it for BERT, and for BERT on token shards the
// tokenizer the shards were made with (tokenizer.json, tokenizer_config.json,
// special_tokens_map.json), so that AutoTokenizer and BertForMaskedLM load the folder. Runs in
// `ringpilot-trainer export` (the checkpoint is a LibTorch archive; `ringpilot` links no LibTorch),
// on the CPU, no MPI.
#pragma once

#include <cstdint>
#include <string>

namespace ringpilot::trainer {

struct ExportOptions {
  std::string run_dir;
  int64_t step = 0;  ///< 0: the newest checkpoint that verifies
  /// The weights file; "" = RUN_DIR/export/step-<8 digits>/model.safetensors. BERT's
  /// config.json goes into the same folder (from_pretrained(folder) wants the weights named
  /// model.safetensors there).
  std::string out;
  /// "" = none. Else a safetensors file with a sample "input" and the checkpoint's model
  /// "output" for it in evaluation mode (class scores; BERT: token scores at every
  /// position), to check that another implementation computes the same.
  std::string reference;
};

struct ExportResult {
  int64_t step = 0;
  std::string checkpoint;  ///< the checkpoint directory read
  std::string weights;     ///< the safetensors file written
  std::string config;      ///< config.json written, or ""
  std::string tokenizer;   ///< tokenizer.json written, or ""
  /// BERT without a tokenizer: why (the shards have no tokenizer.json; synthetic ids)
  std::string no_tokenizer;
  std::string reference;  ///< the reference file written, or ""
  std::string library;    ///< "torchvision" or "transformers"
  std::string architecture;
  int64_t tensors = 0;
};

/// Reads RUN_DIR/job.yaml and the checkpoint (verified against its manifest; nothing in
/// the run directory is changed), writes the files atomically. Throws std::runtime_error
/// (config::ConfigError, checkpoint::CheckpointError, base::FileError) with one line naming
/// the file and the problem.
ExportResult ExportCheckpoint(const ExportOptions& options);

}  // namespace ringpilot::trainer
