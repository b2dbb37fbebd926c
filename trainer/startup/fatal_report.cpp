#include "trainer/startup/fatal_report.h"

#include <atomic>
#include <string>

#include "comm/status.h"

namespace ringpilot::trainer::startup {
namespace {

telemetry::RankLog* g_fatal_log = nullptr;
std::atomic<telemetry::Heartbeat*> g_fatal_heartbeat{nullptr};

void LogFatal(const std::string& message) {
  if (telemetry::Heartbeat* beat = g_fatal_heartbeat.load()) beat->BeatNow("abort");
  if (g_fatal_log) g_fatal_log->Fatal(message);
}

}  // namespace

FatalReporterScope::FatalReporterScope(telemetry::RankLog& log) {
  g_fatal_log = &log;
  comm::SetFatalReporter(&LogFatal);
}

FatalReporterScope::~FatalReporterScope() {
  comm::SetFatalReporter(nullptr);
  g_fatal_log = nullptr;
}

FatalHeartbeatScope::FatalHeartbeatScope(telemetry::Heartbeat& beat) {
  g_fatal_heartbeat.store(&beat);
}

FatalHeartbeatScope::~FatalHeartbeatScope() { g_fatal_heartbeat.store(nullptr); }

}  // namespace ringpilot::trainer::startup
