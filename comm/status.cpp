#include "comm/status.h"

#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace ringpilot::comm {

std::string ProcessLocation() {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!rank) rank = std::getenv("PMI_RANK");
  if (!rank) rank = std::getenv("SLURM_PROCID");
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return std::string("rank ") + (rank ? rank : "?") + " on " + host;
}

namespace {
std::string MpiMessage(const char* call, int rc, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized || MPI_Error_string(rc, text, &len) != MPI_SUCCESS) {
    std::snprintf(text, sizeof(text), "error %d", rc);
  }
  return std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + text + " (" +
         ProcessLocation() + ")";
}
}  // namespace

void ThrowCallError(const char* call, const char* why, const char* file, int line) {
  throw CommError(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + why +
                  " (" + ProcessLocation() + ")");
}

void ThrowMpiError(const char* call, int rc, const char* file, int line) {
  throw CommError(MpiMessage(call, rc, file, line));
}

void AbortOnMpiError(const char* call, int rc, const char* file, int line) {
  AbortJob(MpiMessage(call, rc, file, line), 1);
}

namespace {
std::atomic<FatalReporter> g_fatal_reporter{nullptr};
std::atomic_flag g_aborting = ATOMIC_FLAG_INIT;
}  // namespace

void SetFatalReporter(FatalReporter reporter) { g_fatal_reporter.store(reporter); }

void AbortJob(const std::string& message, int status, const std::function<void()>& after_report) {
  // Two threads may give up at once (the training thread in a collective, the NCCL
  // watchdog): the first one speaks, the other waits to be killed with the job.
  if (g_aborting.test_and_set()) {
    for (;;) ::pause();
  }
  const std::string line = message + " (" + ProcessLocation() + ")";
  if (FatalReporter reporter = g_fatal_reporter.load()) {
    reporter(line);  // the rank log's FATAL line, echoed to stderr
  } else {
    std::fprintf(stderr, "ringpilot: FATAL %s\n", line.c_str());
    std::fflush(stderr);
  }
  if (after_report) after_report();
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);
}

}  // namespace ringpilot::comm
