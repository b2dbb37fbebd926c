#include "history/launcher_record.h"

#include <climits>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "history/record_fields.h"

namespace ringpilot::history {
namespace {

constexpr const char* kStateNames[] = {"running", "finished", "failed", "stopped"};

}  // namespace

const char* ToString(RunState state) { return kStateNames[static_cast<int>(state)]; }

std::optional<RunState> RunStateFromString(const std::string& name) {
  for (int i = 0; i < 4; ++i) {
    if (name == kStateNames[i]) return static_cast<RunState>(i);
  }
  return std::nullopt;
}

std::string LauncherRecordPath(const std::string& run_dir) { return run_dir + "/launcher.json"; }

std::string LauncherJson(const LauncherRecord& r) {
  nlohmann::ordered_json j = {{"pid", r.pid},
                              {"host", r.host},
                              {"executable", r.executable},
                              {"started", r.started},
                              {"updated", r.updated},
                              {"attempt", r.attempt},
                              {"max_attempts", r.max_attempts},
                              {"run", r.run},
                              {"attempts_before", r.attempts_before},
                              {"state", ToString(r.state)},
                              {"detail", r.detail}};
  if (r.exit_status) j["exit_status"] = *r.exit_status;
  if (!r.slurm_job_id.empty()) j["slurm_job_id"] = r.slurm_job_id;
  // A detail line quoting a program's output may hold bytes that are not UTF-8.
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

void WriteLauncherRecord(const std::string& path, const LauncherRecord& record) {
  base::WriteFileAtomically(path, LauncherJson(record));
}

std::optional<LauncherRecord> ReadLauncherRecord(const std::string& path) {
  if (!base::Exists(path)) return std::nullopt;
  const nlohmann::json j = ReadJsonFile(path);
  const RecordFields f(j, path);
  LauncherRecord r;
  if (!f.Has("pid")) f.Fail("pid", "missing");
  r.pid = f.Int("pid", 0, 0, INT_MAX);
  if (!f.Has("state")) f.Fail("state", "missing");
  const std::string state = f.String("state");
  const std::optional<RunState> known = RunStateFromString(state);
  if (!known) f.Fail("state", "'" + state + "' is not running, finished, failed or stopped");
  r.state = *known;
  r.host = f.String("host");
  r.executable = f.String("executable");
  r.started = f.String("started");
  r.updated = f.String("updated");
  r.attempt = f.Int("attempt", 0, 0, INT_MAX);
  r.max_attempts = f.Int("max_attempts", 1, 1, INT_MAX);
  r.run = f.Int("run", 1, 1, INT_MAX);
  r.attempts_before = f.Int("attempts_before", 0, 0, INT_MAX);
  r.detail = f.String("detail");
  if (f.Has("exit_status")) r.exit_status = f.Int("exit_status", 0, 0, 255);
  r.slurm_job_id = f.String("slurm_job_id");
  return r;
}

std::optional<LauncherRecord> ReadLauncherRecordIfValid(const std::string& path) {
  try {
    return ReadLauncherRecord(path);
  } catch (const RecordError&) {
    return std::nullopt;
  }
}

}  // namespace ringpilot::history
