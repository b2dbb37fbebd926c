#include "nccl_profiler/settings.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "base/run_variables.h"

namespace ringpilot::nccl_profiler {
namespace {

// The whole value as a decimal integer in [lo, hi], else SettingsError naming `name`.
int ParseInt(const std::string& name, const std::string& value, int lo, int hi) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || errno != 0 || end == nullptr || *end != '\0' || v < lo || v > hi) {
    throw SettingsError(name + "='" + value + "' is not a number in " + std::to_string(lo) + ".." +
                        std::to_string(hi));
  }
  return static_cast<int>(v);
}

}  // namespace

Settings SettingsFromEnvironment(const base::Environment& env, int first_comm_rank) {
  Settings s;
  const std::string rank = base::Lookup(env, "RANK", "");
  s.rank = rank.empty() ? std::max(first_comm_rank, 0) : ParseInt("RANK", rank, 0, 1 << 24);
  const std::string local_rank = base::Lookup(env, "LOCAL_RANK", "");
  if (!local_rank.empty()) s.local_rank = ParseInt("LOCAL_RANK", local_rank, 0, 1 << 24);
  const std::string port = base::Lookup(env, base::kMetricsPortVar, "");
  const std::string port_base = base::Lookup(env, base::kMetricsPortBaseVar, "");
  if (!port.empty()) {
    s.port = ParseInt(base::kMetricsPortVar, port, 0, 65535);
  } else if (!port_base.empty()) {
    // Without LOCAL_RANK (a launcher that does not set it) the rank stands in: unique on
    // the node, if not compact.
    const bool local = s.local_rank >= 0;
    const int index = local ? s.local_rank : s.rank;
    s.port = base::MetricsPort(ParseInt(base::kMetricsPortBaseVar, port_base, 0, 65535), index);
    if (s.port > 65535) {
      throw SettingsError(std::string(base::kMetricsPortBaseVar) + "=" + port_base +
                          (local ? " + LOCAL_RANK " : " + RANK ") + std::to_string(index) +
                          " is past port 65535");
    }
  }
  const std::string local_world_size = base::Lookup(env, "LOCAL_WORLD_SIZE", "");
  if (port.empty() && s.port > 0 && s.local_rank >= 0 && !local_world_size.empty()) {
    s.port_step = ParseInt("LOCAL_WORLD_SIZE", local_world_size, 1, 1 << 24);
    s.port_tries = base::kMetricsPortBlocks;
  }
  s.bind = base::Lookup(env, base::kMetricsBindVar, base::kMetricsBindAuto);
  s.run_dir = base::Lookup(env, base::kRunDirVar, "");
  s.file_sd_dir = base::Lookup(env, base::kMetricsFileSdDirVar, "");
  const std::string world = base::Lookup(env, "WORLD_SIZE", "");
  const std::string local_world = base::Lookup(env, "LOCAL_WORLD_SIZE", "");
  if (!world.empty() && !local_world.empty()) {
    s.multi_node = ParseInt("WORLD_SIZE", world, 1, 1 << 24) >
                   ParseInt("LOCAL_WORLD_SIZE", local_world, 1, 1 << 24);
  }
  s.job = base::Lookup(env, base::kJobNameVar, "exec");
  if (s.port < 0 && s.run_dir.empty()) {
    throw SettingsError(std::string("none of ") + base::kMetricsPortBaseVar + ", " +
                        base::kMetricsPortVar + ", " + base::kRunDirVar +
                        " is set: nothing to export to (run the program under `ringpilot exec`)");
  }
  return s;
}

}  // namespace ringpilot::nccl_profiler
