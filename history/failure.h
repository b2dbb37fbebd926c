// RUN_DIR/failure.json (the report of a job that failed for good) and attempts/N/failure.json
// (of each failed attempt that was restarted), as their readers need them. The launcher
// writes them (launcher/failure_report.h: FailureJson); `ringpilot status`, `diagnose` and
// history::ReadAttempts read them through here.
#pragma once

#include <optional>
#include <string>

namespace ringpilot::history {

/// The fields of a failure.json that say what failed.
struct FailureRecord {
  int attempts = 0;              ///< the attempt it reports (1-based): attempts made so far
  std::optional<int> exit_code;  ///< mpirun's exit status, when it exited
  std::string signal_name;       ///< the signal that killed mpirun ("SIGKILL"), else ""
  int first_failing_rank = -1;   ///< -1: unknown
  std::string fatal_message;     ///< the failing rank's FATAL line, "" when none
  std::string hang;              ///< why the launcher stopped it as hung, "" when it did not
};

/// Reads a failure.json; nullopt when it is missing, unreadable or not such an object.
std::optional<FailureRecord> ReadFailureRecord(const std::string& path);

/// "exit 78", "killed by SIGKILL", or "exit unknown".
std::string ExitText(const FailureRecord& record);

/// "rank R: MESSAGE", "rank R" (no FATAL line), the hang, or "rank unknown".
std::string FailureLine(const FailureRecord& record);

}  // namespace ringpilot::history
