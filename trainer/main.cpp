// ringpilot-trainer: one MPI rank of a ringpilot job. Started by `ringpilot run`
// through mpirun as `ringpilot-trainer --config RUN_DIR/job.yaml --run-dir RUN_DIR`.
// `ringpilot-trainer --versions` prints the library versions as JSON
// (trainer/telemetry/versions.h); `ringpilot-trainer export RUN_DIR ...` is what
// `ringpilot export` runs (trainer/export.h).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <c10/util/Exception.h>
#include <CLI/CLI.hpp>

#include "base/exit_status.h"
#include "base/files.h"
#include "base/run_variables.h"
#include "comm/status.h"
#include "config/job.h"
#include "data/cifar.h"
#include "history/rank_files.h"
#include "metrics/exporter.h"
#include "trainer/checkpoint/store.h"
#include "trainer/export.h"
#include "trainer/startup/preemption.h"
#include "trainer/telemetry/rank_log.h"
#include "trainer/telemetry/versions.h"
#include "trainer/trainer.h"

namespace {

// A failure on one rank must end every rank: the others may be blocked in a
// collective with it. The FATAL line lets the front end name the first failing rank; the
// exit status (MPI_Abort's, which mpirun returns) tells it whether a restart can help.
[[noreturn]] void Die(const std::string& run_dir, const std::string& message,
                      int status = ringpilot::base::kExitFailure) {
  int rank = 0, initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    ringpilot::base::MakeDirs(run_dir + "/logs");
  } catch (const std::exception&) {
    // Still report on stderr below.
  }
  ringpilot::trainer::telemetry::RankLog log(
      ringpilot::history::RankLogPath(run_dir + "/logs", rank), rank, false);
  log.Fatal(message);
  if (initialized) MPI_Abort(MPI_COMM_WORLD, status);
  std::exit(status);
}

// `ringpilot-trainer export`: one line per file written, or one error line and status 1.
int ExportMain(const ringpilot::trainer::ExportOptions& options) {
  try {
    const ringpilot::trainer::ExportResult r = ringpilot::trainer::ExportCheckpoint(options);
    std::printf("exported %s (step %lld): %lld tensors for %s %s\n", r.checkpoint.c_str(),
                static_cast<long long>(r.step), static_cast<long long>(r.tensors),
                r.library.c_str(), r.architecture.c_str());
    std::printf("weights   %s\n", r.weights.c_str());
    if (!r.config.empty()) std::printf("config    %s\n", r.config.c_str());
    if (!r.tokenizer.empty()) {
      std::printf("tokenizer %s (with tokenizer_config.json, special_tokens_map.json)\n",
                  r.tokenizer.c_str());
    } else if (!r.no_tokenizer.empty()) {
      std::printf("tokenizer none: %s\n", r.no_tokenizer.c_str());
    }
    if (!r.reference.empty()) std::printf("reference %s\n", r.reference.c_str());
    return ringpilot::base::kExitOk;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "ringpilot export: LibTorch error: %s\n", e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringpilot export: %s\n", e.what());
  }
  return ringpilot::base::kExitFailure;
}

}  // namespace

int main(int argc, char** argv) {
  ringpilot::trainer::startup::CatchSignalsEarly();
  CLI::App app{"ringpilot-trainer: one rank of a ringpilot job (started by 'ringpilot run')"};
  std::string config_path, run_dir;
  // Required unless the export subcommand runs (checked after parsing).
  app.add_option("--config", config_path, "resolved job file (RUN_DIR/job.yaml)");
  app.add_option("--run-dir", run_dir, "run directory");
  ringpilot::trainer::ExportOptions export_options;
  CLI::App* export_cmd = app.add_subcommand(
      "export", "write a checkpoint's weights as safetensors (see 'ringpilot export --help')");
  export_cmd->add_option("RUN_DIR", export_options.run_dir, "run directory")->required();
  export_cmd->add_option("--step", export_options.step, "checkpoint step (default: newest)")
      ->check(CLI::PositiveNumber);
  export_cmd->add_option("--out", export_options.out, "weights file (.safetensors)");
  export_cmd->add_option("--reference", export_options.reference,
                         "also write a sample input and the model's output for it");
  app.add_flag_callback(
      "--versions",
      [] {
        const auto versions = ringpilot::trainer::telemetry::QueryLibraryVersions();
        std::printf("%s\n", ringpilot::trainer::telemetry::VersionsJson(versions).dump().c_str());
        throw CLI::Success();
      },
      "print the library versions (compiled against and loaded) as JSON and exit");
  CLI11_PARSE(app, argc, argv);
  if (*export_cmd) return ExportMain(export_options);
  if (config_path.empty() || run_dir.empty()) {
    std::fprintf(stderr, "ringpilot-trainer: --config and --run-dir are required\n");
    return ringpilot::base::kExitUsage;
  }

  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "ringpilot-trainer: MPI_Init_thread failed\n");
    return 1;
  }
  int rc = 0;
  try {
    ringpilot::config::JobConfig config = ringpilot::config::LoadJobConfig(config_path);
    ringpilot::trainer::TrainerOptions options;
    options.run_dir = run_dir;
    if (const char* a = std::getenv(ringpilot::base::kAttemptVar)) {
      options.attempt = std::max(1, std::atoi(a));
    }
    if (const char* v = std::getenv(ringpilot::base::kVerboseVar)) {
      options.verbose = std::string(v) == "1";
    }
    ringpilot::trainer::Trainer trainer(std::move(config), options);
    rc = trainer.Run();
  } catch (const ringpilot::config::ConfigError& e) {
    Die(run_dir, e.what(), ringpilot::base::kExitPermanent);
  } catch (const ringpilot::data::DataError& e) {
    // Errors that every attempt would meet again: not worth a restart.
    Die(run_dir, std::string(e.what()) + " (" + ringpilot::comm::ProcessLocation() + ")",
        ringpilot::base::kExitPermanent);
  } catch (const ringpilot::metrics::ExporterError& e) {
    Die(run_dir, std::string(e.what()) + " (" + ringpilot::comm::ProcessLocation() + ")",
        ringpilot::base::kExitPermanent);
  } catch (const ringpilot::trainer::checkpoint::CheckpointMismatchError& e) {
    Die(run_dir, std::string(e.what()) + " (" + ringpilot::comm::ProcessLocation() + ")",
        ringpilot::base::kExitPermanent);
  } catch (const c10::Error& e) {
    Die(run_dir, std::string("LibTorch error: ") + e.what_without_backtrace() + " (" +
                     ringpilot::comm::ProcessLocation() + ")");
  } catch (const std::exception& e) {
    Die(run_dir, std::string(e.what()) + " (" + ringpilot::comm::ProcessLocation() + ")");
  }
  MPI_Finalize();
  return rc;
}
