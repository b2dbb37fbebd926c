#include "cli/data_command.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "base/exit_status.h"
#include "data/image_pack.h"
#include "topology/affinity.h"

namespace ringpilot::cli {
namespace {

constexpr int64_t kBytesPerMB = 1000 * 1000;

// "N" samples or "NMB" megabytes (10^6 bytes) into options; false for anything else.
bool ParseShardSize(const std::string& text, data::PackOptions* o) {
  std::string digits = text;
  const bool megabytes = digits.size() > 2 && (digits.substr(digits.size() - 2) == "MB" ||
                                               digits.substr(digits.size() - 2) == "mb");
  if (megabytes) digits.resize(digits.size() - 2);
  if (digits.empty() || digits.size() > 12 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  const int64_t n = std::atoll(digits.c_str());
  if (n <= 0) return false;
  (megabytes ? o->shard_bytes : o->shard_samples) = megabytes ? n * kBytesPerMB : n;
  return true;
}

}  // namespace

CLI::App* AddDataCommand(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == "data") return sub;
  }
  CLI::App* data =
      app.add_subcommand("data", "Dataset tools: pack an image folder into shards, tokenize text");
  data->require_subcommand(1, 1);
  return data;
}

void AddPackCommand(CLI::App& data) {
  auto args = std::make_shared<PackArgs>();
  CLI::App* pack = data.add_subcommand(
      "pack", "Write an image folder (ROOT/<class>/<image>) as WebDataset tar shards");
  pack->add_option("SRC_FOLDER", args->folder, "Image folder (data.kind image_folder layout)")
      ->required();
  pack->add_option("OUT_DIR", args->out_dir, "Where shard-NNNNNN.tar and classes.txt go")
      ->required();
  pack->add_option("--shard-size", args->shard_size, "Per shard: N samples, or N MB (e.g. 256MB)")
      ->capture_default_str();
  pack->add_option("--max-side", args->max_side,
                   "Shrink images whose short side is above N px to N, re-encode all as JPEG")
      ->check(CLI::Range(1, 65535));
  pack->add_option("--quality", args->quality, "JPEG quality of the re-encode (with --max-side)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  pack->add_option("--threads", args->threads, "Images processed in parallel; 0 = usable cores")
      ->check(CLI::Range(0, 1024));
  pack->callback([args] {
    const int status = RunPack(*args, std::cout, std::cerr);
    std::cout.flush();
    std::exit(status);
  });
}

int RunPack(const PackArgs& args, std::ostream& out, std::ostream& err) {
  data::PackOptions options;
  if (!ParseShardSize(args.shard_size, &options)) {
    err << "ringpilot data pack: --shard-size '" << args.shard_size
        << "': want N samples or N MB (e.g. 1000 or 256MB)\n";
    return base::kExitUsage;
  }
  options.max_side = args.max_side;
  options.quality = args.quality;
  options.threads = args.threads > 0 ? args.threads : topology::BoundCpuCount();
  try {
    const data::PackResult r = data::PackImageFolder(
        args.folder, args.out_dir, options,
        [&err](const std::string& line) { err << "ringpilot data pack: " << line << "\n"; });
    out << "packed " << r.samples << " images into " << r.shards.size() << " shard(s) in "
        << args.out_dir;
    if (args.max_side > 0) out << " (" << r.resized << " resized)";
    if (r.skipped > 0) out << ", " << r.skipped << " file(s) skipped";
    out << "\n";
  } catch (const std::runtime_error& e) {  // data::DataError, base::FileError
    err << "ringpilot data pack: " << e.what() << "\n";
    return base::kExitUsage;
  }
  return base::kExitOk;
}

}  // namespace ringpilot::cli
