// `ringpilot data tokenize --model SPM_MODEL --out PREFIX TEXT_FILES...`: text to a token
// shard (data/token_shards.h) with a SentencePiece model. The model supplies BERT's special
// ids: it must hold the pieces [CLS], [SEP], [MASK] and [PAD] (spm_train
// --control_symbols=[CLS],[SEP],[MASK],[PAD]; docs/data.md), which go into the shard header.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace ringpilot::cli {

struct TokenizeArgs {
  std::string model;               ///< SentencePiece model file (spm_train's MODEL.model)
  std::string out;                 ///< shard prefix: writes OUT.tokens and OUT.index
  std::vector<std::string> texts;  ///< UTF-8 text files, read in order
};

/// Adds `tokenize` to the `data` group. Like the other file-level commands, its handler runs
/// as a parse callback and ends the process with RunTokenize's exit status.
void AddTokenizeCommand(CLI::App& data_group);

/// Documents are runs of non-blank lines: a blank line or the end of a file ends one (the
/// layout BERT's create_pretraining_data reads). Each line is encoded on its own and a
/// document's ids are concatenated. Returns 0 after writing the shard (one summary line on
/// `out`), or 1 with one line on `err` naming the file for a model that cannot be loaded or
/// lacks a special piece, an unreadable text file, no text at all, or a failed write; the
/// shard at --out is then left as it was.
int RunTokenize(const TokenizeArgs& args, std::ostream& out, std::ostream& err);

}  // namespace ringpilot::cli
