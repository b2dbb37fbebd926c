// `ringpilot data ...`: dataset tools. `data pack SRC_FOLDER OUT_DIR` writes an image folder
// as WebDataset tar shards (data/image_pack.h); other dataset subcommands hang off the same
// group.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

namespace ringpilot::cli {

/// Adds the `data` subcommand group to `app` (once) and returns it, for its subcommands.
CLI::App* AddDataCommand(CLI::App& app);

struct PackArgs {
  std::string folder;
  std::string out_dir;
  std::string shard_size = "256MB";  ///< N samples, or N followed by MB
  int max_side = 0;                  ///< 0: copy the images as they are
  int quality = 90;
  int threads = 0;  ///< 0: the cores this process may use
};

/// Adds `pack` to the `data` group. Like the other groups' subcommands, its handler runs
/// as a parse callback and ends the process with RunPack's exit status.
void AddPackCommand(CLI::App& data);

/// Runs it: 0, or 2 with one line on `err` for a bad argument, folder or output.
int RunPack(const PackArgs& args, std::ostream& out, std::ostream& err);

}  // namespace ringpilot::cli
