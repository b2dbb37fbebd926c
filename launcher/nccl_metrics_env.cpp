#include "launcher/nccl_metrics_env.h"

#include <cerrno>
#include <cstdlib>

#include "base/run_variables.h"
#include "config/job.h"
#include "launcher/torchrun_env.h"

namespace ringpilot::launcher {
namespace {

constexpr const char* kPluginVar = "NCCL_PROFILER_PLUGIN";

long ParseWhole(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0') return -1;
  return v;
}

}  // namespace

std::string NcclProfilerPath(const base::Environment& env, const std::string& self_dir) {
  return base::Lookup(
      env, base::kNcclProfilerVar,
      (self_dir.empty() ? std::string(".") : self_dir) + "/" + kNcclProfilerLibrary);
}

base::Environment AddNcclMetricsEnv(const base::Environment& env, const std::string& plugin_path) {
  base::Environment out = env;
  if (base::Lookup(out, kPluginVar, "").empty()) out[kPluginVar] = plugin_path;
  config::MetricsConfig metrics;  // the job default of port_base
  const std::string base_text = base::Lookup(out, base::kMetricsPortBaseVar, "");
  if (!base_text.empty()) {
    const long v = ParseWhole(base_text);
    if (v < 0 || v > 65535) {
      throw RankEnvError(std::string("ringpilot exec: ") + base::kMetricsPortBaseVar + "='" +
                         base_text + "' is not a port (0..65535)");
    }
    metrics.port_base = static_cast<int>(v);
  }
  // The plugin's rule (nccl_profiler/settings.h): base + LOCAL_RANK, RANK without it.
  const bool local = !base::Lookup(out, "LOCAL_RANK", "").empty();
  const char* index_var = local ? "LOCAL_RANK" : "RANK";
  const long index = ParseWhole(base::Lookup(out, index_var, "0"));
  const int port = config::MetricsPort(metrics, index < 0 ? 0 : static_cast<int>(index));
  if (port > 65535) {
    throw RankEnvError(std::string("ringpilot exec: ") + base::kMetricsPortBaseVar + " " +
                       std::to_string(metrics.port_base) + " + " + index_var + " " +
                       std::to_string(index) + " is past port 65535");
  }
  out[base::kMetricsPortBaseVar] = std::to_string(metrics.port_base);
  return out;
}

}  // namespace ringpilot::launcher
