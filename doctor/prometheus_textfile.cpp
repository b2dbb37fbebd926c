// `ringpilot doctor --prometheus FILE`: the results as Prometheus text for node_exporter's
// textfile collector, written atomically.
#include <cstdio>

#include "doctor/doctor.h"
#include "base/files.h"

namespace ringpilot::doctor {
namespace {

constexpr CheckStatus kStatuses[] = {CheckStatus::kPass, CheckStatus::kWarn, CheckStatus::kFail,
                                     CheckStatus::kSkip};

// A label value with \, " and newline escaped as the exposition format requires.
std::string Escape(const std::string& v) {
  std::string out;
  for (const char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string NodeLabel(const NodeChecks& n) {
  return n.node.empty() ? "" : "node=\"" + Escape(n.node) + "\",";
}

}  // namespace

std::string DoctorPrometheus(const std::vector<NodeChecks>& nodes, double unix_time) {
  std::string out =
      "# HELP ringpilot_doctor_check_status Result of each ringpilot doctor check: 1 for the "
      "status it ended with, 0 for the other statuses.\n"
      "# TYPE ringpilot_doctor_check_status gauge\n";
  for (const NodeChecks& n : nodes) {
    for (const CheckResult& c : n.checks) {
      for (const CheckStatus s : kStatuses) {
        out += "ringpilot_doctor_check_status{" + NodeLabel(n) + "check=\"" + Escape(c.name) +
               "\",status=\"" + ToString(s) + "\"} " + (c.status == s ? "1" : "0") + "\n";
      }
    }
  }
  out +=
      "# HELP ringpilot_doctor_checks Number of ringpilot doctor checks that ended with each "
      "status in the last run.\n"
      "# TYPE ringpilot_doctor_checks gauge\n";
  for (const NodeChecks& n : nodes) {
    for (const CheckStatus s : kStatuses) {
      int count = 0;
      for (const CheckResult& c : n.checks) count += c.status == s ? 1 : 0;
      out += "ringpilot_doctor_checks{" + NodeLabel(n) + "status=\"" + ToString(s) + "\"} " +
             std::to_string(count) + "\n";
    }
  }
  char ts[64];
  std::snprintf(ts, sizeof ts, "%.3f", unix_time);
  out +=
      "# HELP ringpilot_doctor_last_run_timestamp_seconds Unix time at which the last "
      "ringpilot doctor run finished.\n"
      "# TYPE ringpilot_doctor_last_run_timestamp_seconds gauge\n"
      "ringpilot_doctor_last_run_timestamp_seconds " +
      std::string(ts) + "\n";
  return out;
}

void WriteDoctorFile(const std::string& path, const std::string& text) {
  base::WriteFileAtomically(path, text);  // base::FileError names PATH
}

}  // namespace ringpilot::doctor
