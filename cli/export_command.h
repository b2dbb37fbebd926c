// `ringpilot export RUN_DIR [--step N] [--out FILE] [--reference FILE]`: a checkpoint's
// weights as safetensors for torchvision / Hugging Face (docs/recipes.md). The checkpoint
// is a LibTorch archive and `ringpilot` links no LibTorch, so this runs
// `ringpilot-trainer export ...` (trainer/export.h) in its place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace ringpilot::cli {

struct ExportArgs {
  std::string run_dir;
  int64_t step = 0;  ///< 0: the newest valid checkpoint
  std::string out;
  std::string reference;
};

/// Adds the `export` subcommand; its handler runs as a parse callback and ends the process
/// (exec of the trainer, or status 127/126 with one line when it cannot be run).
void AddExportCommand(CLI::App& app);

/// The trainer's command line for `args` (argv[0] = `trainer`).
std::vector<std::string> ExportTrainerArgv(const std::string& trainer, const ExportArgs& args);

}  // namespace ringpilot::cli
