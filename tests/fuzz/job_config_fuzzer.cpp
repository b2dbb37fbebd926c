// libFuzzer target: the job file parser (config::ParseJobConfig) with `--set` overrides.
// Input: YAML text; after the first NUL byte, NUL-separated overrides (`key=value`).
// Contract checked: every input parses or throws config::ConfigError whose lines (the
// problems of the job, one pass) are each one FILE:LINE:COL line, at most 20 of them and
// then one "... and N more"; a job that parses survives EmitJobConfig -> ParseJobConfig
// unchanged (the resolved RUN_DIR/job.yaml every rank reads back), and stops parsing when
// text follows the value of one of its overrides (an override is one YAML value).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "config/job.h"

namespace {

[[noreturn]] void Finding(const std::string& what, const std::string& detail) {
  std::fprintf(stderr, "job_config_fuzzer: %s\n%s\n", what.c_str(), detail.c_str());
  std::abort();
}

// 20 problems listed, then "... and N more".
constexpr size_t kMaxLines = 21;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringpilot::config;
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  if (const size_t nul = text.find('\0'); nul != std::string::npos) {
    for (size_t pos = nul + 1; pos <= text.size();) {
      size_t end = text.find('\0', pos);
      if (end == std::string::npos) end = text.size();
      overrides.push_back(text.substr(pos, end - pos));
      pos = end + 1;
    }
    text.resize(nul);
  }
  JobConfig job;
  try {
    job = ParseJobConfig(text, "fuzz.yaml", overrides);
  } catch (const ConfigError& e) {
    // Every problem of the job in one pass: one line each, FILE:LINE:COL: ..., and what()
    // is exactly those lines.
    const std::vector<std::string>& lines = e.lines();
    if (lines.size() > kMaxLines) Finding("more than 20 problems listed", e.what());
    std::string joined;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& line = lines[i];
      const bool placed = line.rfind("fuzz.yaml:", 0) == 0 || line.rfind("--set[", 0) == 0;
      const bool more = i + 1 == lines.size() && i + 1 == kMaxLines &&
                        line.rfind("... and ", 0) == 0 && line.size() > 13 &&
                        line.compare(line.size() - 5, 5, " more") == 0;
      if (line.empty() || line.find('\n') != std::string::npos || !(placed || more)) {
        Finding("a ConfigError line is not one FILE:LINE:COL line", line);
      }
      joined += (joined.empty() ? "" : "\n") + line;
    }
    if (lines.empty() || joined != e.what())
      Finding("ConfigError's what() is not its lines", e.what());
    return 0;
  }
  for (size_t i = 0; i < overrides.size(); ++i) {
    if (overrides[i].find('=') == std::string::npos) continue;
    std::vector<std::string> trailing = overrides;
    trailing[i] += "\n---\nx";
    try {
      ParseJobConfig(text, "fuzz.yaml", trailing);
      Finding("an override with text after its value was accepted", trailing[i]);
    } catch (const ConfigError&) {
    }
  }
  const std::string emitted = EmitJobConfig(job);
  JobConfig again;
  try {
    again = ParseJobConfig(emitted, "emitted.yaml");
  } catch (const ConfigError& e) {
    Finding(std::string("the emitted job does not parse: ") + e.what(), emitted);
  }
  const std::string twice = EmitJobConfig(again);
  if (twice != emitted) Finding("emit -> parse -> emit changed the job", emitted + "---\n" + twice);
  return 0;
}
