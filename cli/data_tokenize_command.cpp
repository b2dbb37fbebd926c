#include "cli/data_tokenize_command.h"

#include <sentencepiece_processor.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "base/environment.h"
#include "base/exit_status.h"
#include "base/files.h"
#include "base/subprocess.h"
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

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The Python that runs bin/ringpilot-hf-tokenizer.py: RINGPILOT_PYTHON, else the one the
// build took LibTorch from (its venv has `tokenizers` and `transformers`), else python3.
std::string HelperPython() {
  const base::Environment env = base::CurrentEnvironment();
  std::string python = base::Lookup(env, "RINGPILOT_PYTHON", "");
#ifdef RINGPILOT_BUILD_PYTHON
  if (python.empty() && base::Exists(RINGPILOT_BUILD_PYTHON)) python = RINGPILOT_BUILD_PYTHON;
#endif
  return python.empty() ? "python3" : python;
}

// Runs the tokenizer helper with `args`; "" when it succeeded, else its last stderr line
// (or why it could not run).
std::string RunHelper(const std::vector<std::string>& args) {
  const std::string script =
      base::DirName(base::SelfExecutablePath()) + "/ringpilot-hf-tokenizer.py";
  if (!base::Exists(script)) return script + " is missing (build ringpilot)";
  std::vector<std::string> words = {HelperPython(), script};
  words.insert(words.end(), args.begin(), args.end());
  base::SpawnOptions helper;
  helper.argv = words;
  helper.stderr_to = base::ChildOutput::kPipe;
  base::RunResult run;
  try {
    run = base::RunToEnd(helper);
  } catch (const base::SpawnError& e) {
    return e.what();
  }
  if (run.exec_errno != 0) {
    return "cannot run " + words[0] + ": " + std::strerror(run.exec_errno);
  }
  if (run.status.Succeeded()) return "";
  std::string& text = run.error_output;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const std::string last =
      text.substr(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
  if (!last.empty()) return last;
  return words[0] + " " + script + " failed (status " + std::to_string(run.status.ShellCode()) +
         ")";
}

// Every text file readable, before anything is written.
void CheckTexts(const std::vector<std::string>& texts) {
  for (const std::string& text : texts) {
    if (base::IsDirectory(text)) throw TokenizeError(text + ": a folder, not a text file");
    std::ifstream probe(text);
    if (!probe) throw TokenizeError(text + ": cannot read: " + std::strerror(errno));
  }
}

// A Hugging Face vocabulary (WordPiece vocab.txt, tokenizer.json): the helper encodes the
// documents with the `tokenizers` library into a temporary file of ids, which becomes the
// shard here (one writer of the format), and writes PREFIX.tokenizer.json.
data::TokenShardInfo TokenizeWithHuggingFace(const TokenizeArgs& args) {
  if (!base::Exists(args.model)) throw TokenizeError(args.model + ": no such file");
  CheckTexts(args.texts);
  const std::string ids_path = args.out + ".ids.tmp-" + std::to_string(::getpid());
  const std::string tokenizer_tmp = args.out + ".tokenizer.json.tmp-" + std::to_string(::getpid());
  struct Cleanup {
    std::vector<std::string> paths;
    ~Cleanup() {
      for (const std::string& p : paths) std::remove(p.c_str());
    }
  } cleanup{{ids_path, tokenizer_tmp}};
  std::vector<std::string> helper = {"encode", args.model, tokenizer_tmp, ids_path};
  helper.insert(helper.end(), args.texts.begin(), args.texts.end());
  if (const std::string problem = RunHelper(helper); !problem.empty()) {
    throw TokenizeError(problem);
  }
  std::ifstream in(ids_path, std::ios::binary);
  std::string header;
  std::getline(in, header);
  const nlohmann::json h = nlohmann::json::parse(header, nullptr, false);
  if (!in || h.is_discarded()) throw TokenizeError(ids_path + ": the helper wrote no header");
  data::TokenVocab vocab;
  vocab.size = h.value("vocab_size", int64_t{0});
  vocab.cls = h.value("cls", int64_t{-1});
  vocab.sep = h.value("sep", int64_t{-1});
  vocab.mask = h.value("mask", int64_t{-1});
  vocab.pad = h.value("pad", int64_t{-1});
  data::TokenShardWriter writer(args.out, vocab);
  std::vector<int64_t> document;
  std::vector<uint32_t> ids;
  for (uint32_t n = 0; in.read(reinterpret_cast<char*>(&n), sizeof(n));) {
    ids.resize(n);
    if (!in.read(reinterpret_cast<char*>(ids.data()), static_cast<std::streamsize>(n) * 4)) {
      throw TokenizeError(ids_path + ": truncated");
    }
    document.assign(ids.begin(), ids.end());
    writer.AddDocument(document);
  }
  if (writer.tokens() == 0) throw TokenizeError(args.texts.front() + ": no text to tokenise");
  const data::TokenShardInfo info = writer.Finish();
  base::Rename(tokenizer_tmp, data::TokenizerFilePath(args.out));
  return info;
}

data::TokenShardInfo TokenizeWithSentencePiece(const TokenizeArgs& args) {
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
  CheckTexts(args.texts);
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
  return writer.Finish();
}

}  // namespace

void AddTokenizeCommand(CLI::App& data_group) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* tokenize = data_group.add_subcommand(
      "tokenize",
      "Tokenise text files into a token shard (PREFIX.tokens, PREFIX.index) for data.kind "
      "tokens, and write the Hugging Face tokenizer beside it (PREFIX.tokenizer.json)");
  tokenize
      ->add_option("--model", args->model,
                   "SentencePiece model (spm_train's .model), or a Hugging Face WordPiece "
                   "vocab.txt or tokenizer.json (read with the `tokenizers` library)")
      ->required()
      ->type_name("MODEL");
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
    data::TokenShardInfo info;
    std::string note;
    if (EndsWith(args.model, ".txt") || EndsWith(args.model, ".json")) {
      info = TokenizeWithHuggingFace(args);
    } else {
      info = TokenizeWithSentencePiece(args);
      // The same tokenizer for Hugging Face (`ringpilot export` puts it beside the
      // weights); the shard is whole without it, and an older one would not match it.
      std::remove(data::TokenizerFilePath(args.out).c_str());
      const std::string problem =
          RunHelper({"spm", args.model, data::TokenizerFilePath(args.out),
                     std::to_string(info.vocab.cls), std::to_string(info.vocab.sep),
                     std::to_string(info.vocab.mask), std::to_string(info.vocab.pad)});
      if (!problem.empty()) {
        note = "ringpilot data tokenize: no " + data::TokenizerFilePath(args.out) + " (" + problem +
               "): `ringpilot export` will write the weights without a tokenizer\n";
      }
    }
    out << "wrote " << data::TokenFilePath(args.out) << " and " << data::IndexFilePath(args.out)
        << ": " << info.tokens << " tokens in " << info.documents << " documents, vocabulary "
        << info.vocab.size << " (" << info.width << "-byte ids; [CLS] " << info.vocab.cls
        << ", [SEP] " << info.vocab.sep << ", [MASK] " << info.vocab.mask << ", [PAD] "
        << info.vocab.pad << ")";
    if (note.empty()) out << "; tokenizer " << data::TokenizerFilePath(args.out);
    out << "\n";
    err << note;
    return base::kExitOk;
  } catch (const std::exception& e) {  // TokenizeError, data::DataError, base::FileError
    err << "ringpilot data tokenize: " << e.what() << "\n";
    return base::kExitFailure;
  }
}

}  // namespace ringpilot::cli
