// libFuzzer target: Slurm's hostlist expressions (SLURM_JOB_NODELIST) and the compressed
// task counts (SLURM_TASKS_PER_NODE), slurm/nodelist.h. Input: the text of either.
// Contract checked: each expands or throws std::invalid_argument; an expansion holds at
// most kMaxExpandedHosts names, none empty or holding a separator or a bracket; task counts
// are positive.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "slurm/nodelist.h"

namespace {

[[noreturn]] void Finding(const std::string& what, const std::string& input) {
  std::fprintf(stderr, "nodelist_fuzzer: %s (input '%s')\n", what.c_str(), input.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringpilot::slurm;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const std::vector<std::string> hosts = ExpandNodelist(text);
    if (hosts.empty() || hosts.size() > kMaxExpandedHosts) Finding("host count out of range", text);
    for (const std::string& h : hosts) {
      if (h.empty() || h.find_first_of(",[]") != std::string::npos) {
        Finding("malformed host '" + h + "'", text);
      }
    }
  } catch (const std::invalid_argument&) {
  }
  try {
    const std::vector<int> tasks = ExpandTasksPerNode(text);
    if (tasks.empty() || tasks.size() > kMaxExpandedHosts) Finding("node count out of range", text);
    for (const int t : tasks) {
      if (t <= 0) Finding("task count " + std::to_string(t), text);
    }
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
