#include "trainer/startup/preemption.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "base/exit_status.h"

namespace ringpilot::trainer::startup {
namespace {

std::atomic<int> g_usr1_received{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");

extern "C" void OnUsr1(int /*sig*/) { g_usr1_received.store(1, std::memory_order_relaxed); }

// Set by CatchSignalsEarly: a SIGUSR1 that arrived since then is kept for the watch.
std::atomic<bool> g_caught_early{false};

}  // namespace

void CatchSignalsEarly() {
  struct sigaction on {};
  on.sa_handler = OnUsr1;
  sigemptyset(&on.sa_mask);
  on.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &on, nullptr);
  // A trace flush asked for before the trace exists has nothing to write; the default
  // action would kill the rank.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGUSR2, &ignore, nullptr);
  g_caught_early.store(true);
}

PreemptionWatch::PreemptionWatch() {
  if (!g_caught_early.exchange(false)) g_usr1_received.store(0);
  struct sigaction on {};
  on.sa_handler = OnUsr1;
  sigemptyset(&on.sa_mask);
  on.sa_flags = SA_RESTART;  // MPI and file I/O in flight carry on
  if (::sigaction(SIGUSR1, &on, &previous_) != 0) {
    throw std::runtime_error(std::string("cannot install the SIGUSR1 handler: ") +
                             std::strerror(errno) + " (" + __FILE__ + ":" +
                             std::to_string(__LINE__) + ")");
  }
  installed_ = true;
}

PreemptionWatch::~PreemptionWatch() {
  if (installed_) ::sigaction(SIGUSR1, &previous_, nullptr);
}

bool PreemptionWatch::requested() const {
  return g_usr1_received.load(std::memory_order_relaxed) != 0;
}

bool PreemptionWatch::AgreeToStop(comm::Communicator& comm) const {
  at::Tensor flag = at::full({1}, requested() ? 1 : 0, at::kInt);
  comm.AllReduce(flag, comm::ReduceOp::kMax)->Wait();
  return flag.item<int>() != 0;
}

int PreemptionWatch::Stop(telemetry::RankLog& log, int64_t done) const {
  log.Info("preempted: SIGUSR1 received; checkpoint of step " + std::to_string(done) +
           " written, stopping with exit status " + std::to_string(base::kExitPreempted) +
           " (rerun the run directory to resume)");
  return base::kExitPreempted;
}

}  // namespace ringpilot::trainer::startup
