#include "launcher/run_state.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include <nlohmann/json.hpp>

#include "base/environment.h"
#include "base/files.h"

namespace ringpilot::launcher {
namespace {

constexpr const char* kStateNames[] = {"running", "finished", "failed", "stopped"};

std::string ReadLink(const std::string& path) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  std::string target = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  // A binary replaced (rebuilt) while it runs reads "PATH (deleted)".
  static const std::string kDeleted = " (deleted)";
  if (target.size() > kDeleted.size() &&
      target.compare(target.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0) {
    target.resize(target.size() - kDeleted.size());
  }
  return target;
}

}  // namespace

const char* ToString(RunState state) { return kStateNames[static_cast<int>(state)]; }

std::optional<RunState> RunStateFromString(const std::string& name) {
  for (int i = 0; i < 4; ++i) {
    if (name == kStateNames[i]) return static_cast<RunState>(i);
  }
  return std::nullopt;
}

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
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::optional<LauncherRecord> ParseLauncherJson(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("pid") || !j["pid"].is_number_integer() ||
      !j.contains("state") || !j["state"].is_string()) {
    return std::nullopt;
  }
  const std::optional<RunState> state = RunStateFromString(j["state"].get<std::string>());
  if (!state) return std::nullopt;
  LauncherRecord r;
  r.pid = j["pid"].get<int>();
  r.state = *state;
  const auto text_of = [&j](const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  const auto int_of = [&j](const char* key, int fallback) {
    return j.contains(key) && j[key].is_number_integer() ? j[key].get<int>() : fallback;
  };
  r.host = text_of("host");
  r.executable = text_of("executable");
  r.started = text_of("started");
  r.updated = text_of("updated");
  r.detail = text_of("detail");
  r.slurm_job_id = text_of("slurm_job_id");
  r.attempt = int_of("attempt", 0);
  r.max_attempts = int_of("max_attempts", 1);
  r.run = int_of("run", 1);
  r.attempts_before = int_of("attempts_before", 0);
  if (j.contains("exit_status") && j["exit_status"].is_number_integer()) {
    r.exit_status = j["exit_status"].get<int>();
  }
  return r;
}

std::optional<LauncherRecord> ReadLauncherRecord(const std::string& path) {
  try {
    return ParseLauncherJson(base::ReadFile(path));
  } catch (const base::FileError&) {
    return std::nullopt;
  }
}

Liveness CheckLauncher(const LauncherRecord& record) {
  if (!record.host.empty() && record.host != base::HostName()) return Liveness::kElsewhere;
  if (record.pid <= 0) return Liveness::kGone;
  if (::kill(record.pid, 0) != 0 && errno == ESRCH) return Liveness::kGone;
  // The pid may have been reused: the process must still be the same executable (when
  // /proc tells; another user's process cannot be read, and then the pid is trusted).
  const std::string exe = ReadLink("/proc/" + std::to_string(record.pid) + "/exe");
  if (!exe.empty() && !record.executable.empty() && exe != record.executable) {
    return Liveness::kGone;
  }
  return Liveness::kAlive;
}

}  // namespace ringpilot::launcher
