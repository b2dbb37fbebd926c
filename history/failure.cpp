#include "history/failure.h"

#include <fstream>

#include <nlohmann/json.hpp>

namespace ringpilot::history {

std::optional<FailureRecord> ReadFailureRecord(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  FailureRecord r;
  const auto int_of = [&j](const char* key) -> std::optional<int> {
    if (!j.contains(key) || !j[key].is_number_integer()) return std::nullopt;
    return j[key].get<int>();
  };
  const auto text_of = [&j](const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  r.attempts = int_of("attempts").value_or(0);
  r.exit_code = int_of("exit_code");
  r.signal_name = text_of("signal_name");
  r.first_failing_rank = int_of("first_failing_rank").value_or(-1);
  r.fatal_message = text_of("fatal_message");
  r.hang = text_of("hang");
  return r;
}

std::string ExitText(const FailureRecord& r) {
  if (!r.signal_name.empty()) return "killed by " + r.signal_name;
  return r.exit_code ? "exit " + std::to_string(*r.exit_code) : std::string("exit unknown");
}

std::string FailureLine(const FailureRecord& r) {
  const std::string rank =
      r.first_failing_rank >= 0 ? "rank " + std::to_string(r.first_failing_rank) : "rank unknown";
  if (!r.fatal_message.empty()) return rank + ": " + r.fatal_message;
  if (!r.hang.empty()) return rank + ": hung: " + r.hang;
  return rank + (r.first_failing_rank >= 0 ? " (no FATAL line)" : "");
}

}  // namespace ringpilot::history
