#include "cli/data_tokenize_command.h"

#include <sentencepiece_processor.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "base/exit_status.h"
#include "base/files.h"
#include "data/token_shards.h"

namespace ringpilot::cli {
namespace {

// Thrown for what the user must fix; one line, naming the file.
class TokenizeError : public std::runtime_error {
 public:
  explicit TokenizeError(const std::string& line) : std::runtime_error(line) {}
};

// The id of `piece`, which the model must hold as a whole piece (a control or user-defined
// symbol); not the unknown id that PieceToId returns for anything else.
int64_t SpecialId(const sentencepiece::SentencePieceProcessor& sp, const std::string& model,
                  const std::string& piece) {
  const int id = sp.PieceToId(piece);
  if (id < 0 || id >= sp.GetPieceSize() || sp.IdToPiece(id) != piece) {
    throw TokenizeError(model + ": no " + piece +
                        " piece; train the model with spm_train "
                        "--control_symbols=[CLS],[SEP],[MASK],[PAD] (docs/data.md)");
  }
  return id;
}

bool Blank(const std::string& line) {
  return line.find_first_not_of(" \t\r\n\f\v") == std::string::npos;
}

}  // namespace

void AddTokenizeCommand(CLI::App& data_group) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* tokenize = data_group.add_subcommand(
      "tokenize",
      "Tokenise text files with a SentencePiece model into a token shard (PREFIX.tokens, "
      "PREFIX.index) for data.kind tokens");
  tokenize->add_option("--model", args->model, "SentencePiece model (spm_train's .model file)")
      ->required()
      ->type_name("SPM_MODEL");
  tokenize->add_option("--out", args->out, "Shard prefix: writes PREFIX.tokens and PREFIX.index")
      ->required()
      ->type_name("PREFIX");
  tokenize
      ->add_option("TEXT_FILES", args->texts, "UTF-8 text; documents are separated by blank lines")
      ->required();
  tokenize->callback([args] {
    const int status = RunTokenize(*args, std::cout, std::cerr);
    std::cout.flush();
    std::exit(status);
  });
}

int RunTokenize(const TokenizeArgs& args, std::ostream& out, std::ostream& err) {
  try {
    sentencepiece::SentencePieceProcessor sp;
    if (!base::Exists(args.model)) throw TokenizeError(args.model + ": no such file");
    if (const auto status = sp.Load(args.model); !status.ok()) {
      throw TokenizeError(args.model + ": not a SentencePiece model (" + status.ToString() + ")");
    }
    data::TokenVocab vocab;
    vocab.size = sp.GetPieceSize();
    vocab.cls = SpecialId(sp, args.model, "[CLS]");
    vocab.sep = SpecialId(sp, args.model, "[SEP]");
    vocab.mask = SpecialId(sp, args.model, "[MASK]");
    vocab.pad = SpecialId(sp, args.model, "[PAD]");
    for (const std::string& text : args.texts) {  // all readable before anything is written
      if (base::IsDirectory(text)) throw TokenizeError(text + ": a folder, not a text file");
      std::ifstream probe(text);
      if (!probe) throw TokenizeError(text + ": cannot read: " + std::strerror(errno));
    }
    data::TokenShardWriter writer(args.out, vocab);
    std::vector<int64_t> document;
    std::vector<int> ids;
    for (const std::string& text : args.texts) {
      std::ifstream in(text);
      std::string line;
      while (std::getline(in, line)) {
        if (Blank(line)) {
          writer.AddDocument(document);
          document.clear();
          continue;
        }
        if (const auto status = sp.Encode(line, &ids); !status.ok()) {
          throw TokenizeError(text + ": cannot tokenise: " + status.ToString());
        }
        document.insert(document.end(), ids.begin(), ids.end());
      }
      if (in.bad()) throw TokenizeError(text + ": read error: " + std::strerror(errno));
      writer.AddDocument(document);
      document.clear();
    }
    if (writer.tokens() == 0) throw TokenizeError(args.texts.front() + ": no text to tokenise");
    const data::TokenShardInfo info = writer.Finish();
    out << "wrote " << data::TokenFilePath(args.out) << " and " << data::IndexFilePath(args.out)
        << ": " << info.tokens << " tokens in " << info.documents << " documents, vocabulary "
        << info.vocab.size << " (" << info.width << "-byte ids; [CLS] " << info.vocab.cls
        << ", [SEP] " << info.vocab.sep << ", [MASK] " << info.vocab.mask << ", [PAD] "
        << info.vocab.pad << ")\n";
    return base::kExitOk;
  } catch (const std::exception& e) {  // TokenizeError, data::DataError, base::FileError
    err << "ringpilot data tokenize: " << e.what() << "\n";
    return base::kExitFailure;
  }
}

}  // namespace ringpilot::cli
