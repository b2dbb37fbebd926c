#include "cli/export_command.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>

#include "base/environment.h"
#include "base/exit_status.h"
#include "base/files.h"
#include "base/subprocess.h"

namespace ringpilot::cli {
namespace {

int RunExport(const ExportArgs& args) {
  const base::Environment env = base::CurrentEnvironment();
  // The trainer beside this executable, as `ringpilot run` finds it.
  const std::string trainer = base::Lookup(
      env, "RINGPILOT_TRAINER", base::DirName(base::SelfExecutablePath()) + "/ringpilot-trainer");
  const std::string path = base::ResolveExecutable(trainer, base::Lookup(env, "PATH", ""));
  if (path.empty()) {
    std::cerr << "ringpilot export: trainer '" << trainer
              << "' not found or not executable (build ringpilot-trainer, or set "
                 "RINGPILOT_TRAINER)\n";
    return base::kExitNotFound;
  }
  const int err = base::ExecInPlace(path, ExportTrainerArgv(path, args));
  std::cerr << "ringpilot export: cannot execute " << path << ": " << std::strerror(err) << "\n";
  return err == ENOENT ? base::kExitNotFound : base::kExitNotExecutable;
}

}  // namespace

std::vector<std::string> ExportTrainerArgv(const std::string& trainer, const ExportArgs& args) {
  std::vector<std::string> argv = {trainer, "export", args.run_dir};
  if (args.step > 0) argv.insert(argv.end(), {"--step", std::to_string(args.step)});
  if (!args.out.empty()) argv.insert(argv.end(), {"--out", args.out});
  if (!args.reference.empty()) argv.insert(argv.end(), {"--reference", args.reference});
  return argv;
}

void AddExportCommand(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "export",
      "Write a checkpoint's weights as safetensors under torchvision / Hugging Face names "
      "(BERT: with config.json), loadable by torchvision.models and BertForMaskedLM");
  cmd->add_option("RUN_DIR", args->run_dir, "Run directory")->required();
  cmd->add_option("--step", args->step, "Checkpoint step (default: the newest valid one)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--out", args->out,
                  "Weights file (default RUN_DIR/export/step-XXXXXXXX/model.safetensors); "
                  "BERT's config.json goes beside it")
      ->type_name("FILE");
  cmd->add_option("--reference", args->reference,
                  "Also write a sample input and this checkpoint's output for it "
                  "(safetensors: input, output) to check a port")
      ->type_name("FILE");
  cmd->callback([args] { std::exit(RunExport(*args)); });
}

}  // namespace ringpilot::cli
