#include "launcher/run_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <string>
#include <vector>

#include "base/files.h"
#include "base/run_variables.h"
#include "history/attempts.h"
#include "history/launcher_record.h"
#include "history/rank_files.h"
#include "history/run_summary.h"

namespace ringpilot::launcher {

RunDirLayout::RunDirLayout(const std::string& root_dir)
    : root(root_dir),
      logs(root_dir + "/logs"),
      checkpoints(root_dir + "/checkpoints"),
      trace(root_dir + "/trace"),
      job_yaml(root_dir + "/job.yaml"),
      launcher_log(root_dir + "/logs/launcher.log"),
      failure_json(root_dir + "/failure.json"),
      summary_json(history::RunSummaryPath(root_dir)),
      hostfile(root_dir + "/hostfile"),
      launcher_json(history::LauncherRecordPath(root_dir)),
      stop_request(root_dir + "/" + base::kStopRequestFile),
      prometheus_targets(root_dir + "/" + base::kScrapeTargetsFile) {}

std::string RunDirLayout::RankLog(int rank) const { return history::RankLogPath(logs, rank); }

CheckpointRef LatestCheckpoint(const std::string& checkpoints_dir) {
  CheckpointRef latest;
  std::vector<std::string> names;
  try {
    names = base::ListDir(checkpoints_dir);
  } catch (const base::FileError&) {
    return latest;
  }
  for (const std::string& name : names) {
    if (name.rfind("step-", 0) != 0) continue;
    const std::size_t end = name.find_first_not_of("0123456789", 5);
    const std::string digits = name.substr(5, end == std::string::npos ? end : end - 5);
    if (digits.empty() || digits.size() > 18) continue;
    if (end != std::string::npos) {
      // step-N.EXT: a finished file of a program; in-progress names are skipped.
      const std::string ext = name.substr(end);
      if (ext.size() < 2 || ext[0] != '.') continue;
      bool writing = false;
      for (const char* suffix : {".tmp", ".partial", ".part"}) {
        const std::string sfx(suffix);
        if (ext.size() >= sfx.size() && ext.compare(ext.size() - sfx.size(), sfx.size(), sfx) == 0)
          writing = true;
      }
      if (writing) continue;
    }
    const int64_t step = std::stoll(digits);
    if (step > latest.step) {
      latest.step = step;
      latest.path = checkpoints_dir + "/" + name;
    }
  }
  return latest;
}

std::string ResumeCommand(const std::string& run_dir) {
  return "ringpilot run " + run_dir + "/job.yaml --run-dir " + run_dir;
}

std::string RunDirLayout::AttemptFailureJson(int attempt) const {
  return history::AttemptFailurePath(root, attempt);
}

std::string DefaultRunDirName(const std::string& job_name, std::time_t now,
                              const std::string& parent) {
  std::tm local{};
  ::localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return parent + "/" + job_name + "-" + stamp;
}

std::string UniqueRunDir(const std::string& base) {
  if (!base::Exists(base)) return base;
  for (int n = 2;; ++n) {
    const std::string candidate = base + "-" + std::to_string(n);
    if (!base::Exists(candidate)) return candidate;
  }
}

std::string ClaimNewRunDir(const std::string& base) {
  const std::string parent = base::DirName(base);
  base::MakeDirs(parent);
  for (int n = 1;; ++n) {
    const std::string candidate = n == 1 ? base : base + "-" + std::to_string(n);
    if (::mkdir(candidate.c_str(), 0755) == 0) return candidate;
    if (errno != EEXIST) base::ThrowFileError(candidate, "create directory", errno);
  }
}

bool KeepPrevious(const std::string& path) {
  if (!base::Exists(path)) return false;
  const std::string prev = history::PrevPath(path);
  if (base::Exists(prev)) base::Rename(prev, history::NextOlderPath(path));
  if (::link(path.c_str(), prev.c_str()) != 0) base::ThrowFileError(prev, "create", errno);
  base::FsyncPath(base::DirName(path));
  return true;
}

bool KeepPreviousAttempts(const RunDirLayout& layout) {
  const std::string attempts = history::AttemptsDir(layout.root);
  if (!base::Exists(attempts)) return false;
  const std::string prev = history::PrevPath(attempts);
  if (base::Exists(prev)) base::Rename(prev, history::NextOlderPath(attempts));
  base::Rename(attempts, prev);
  base::FsyncPath(layout.root);
  return true;
}

PreparedRunDir PrepareRunDir(const RunDirLayout& layout, const std::string& job_yaml) {
  base::MakeDirs(layout.root);
  for (const std::string* dir : {&layout.logs, &layout.checkpoints, &layout.trace}) {
    base::MakeDirs(*dir);
  }
  PreparedRunDir result;
  std::string old_yaml;
  if (base::Exists(layout.job_yaml)) {
    result.resumed = true;
    old_yaml = base::ReadFile(layout.job_yaml);
    if (old_yaml == job_yaml) return result;  // same config: nothing to keep or rewrite
    result.config_changed = true;
    KeepPrevious(layout.job_yaml);
  }
  base::WriteFileAtomically(layout.job_yaml, job_yaml);
  return result;
}

}  // namespace ringpilot::launcher
