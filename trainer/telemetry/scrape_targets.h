// RUN_DIR/prometheus-targets.json: the Prometheus file_sd file of a job's exporters
// (docs/metrics.md, "Discovery"), so one `file_sd_configs` glob over the run directories
// finds every rank, on whatever port it got.
#pragma once

#include <string>

#include "comm/communicator.h"
#include "metrics/exporter.h"

namespace ringpilot::trainer::telemetry {

/// RUN_DIR/prometheus-targets.json.
std::string ScrapeTargetsPath(const std::string& run_dir);

/// Collective over `host` (every rank calls it): each rank's exporter address, as
/// metrics::TargetHost of its bound address and the port it really got ("" for a rank that
/// serves none), goes to rank 0, which writes the file atomically: one target group with
/// the target labels `ringpilot_job` (`job`), `ringpilot_run` (the run directory's last
/// component) and, with TLS, `__scheme__` "https". With `file_sd_dir` (metrics.file_sd_dir)
/// rank 0 also points the symlink FILE_SD_DIR/<ringpilot_run>.json at the file (replacing
/// one of an earlier attempt), so one file_sd glob finds every run and follows each file's
/// later changes. Throws config::ConfigError naming the key when the link cannot be made,
/// base::FileError when the file cannot be written (rank 0).
void PublishScrapeTargets(comm::Communicator& host, const metrics::Exporter* exporter,
                          const std::string& job, const std::string& run_dir,
                          const std::string& file_sd_dir);

/// Rank 0, when the job ends on purpose (finished, or stopped after a checkpoint): the file
/// becomes an empty list, so Prometheus stops scraping the ranks and its "target down"
/// alert stays quiet. A job that fails keeps its targets (and the alert fires). Never
/// throws: a run that finished is not failed by its discovery file.
void WithdrawScrapeTargets(const std::string& run_dir);

}  // namespace ringpilot::trainer::telemetry
