// Status checks at the MPI / CUDA / NCCL boundary. Every message names the call, the
// source location, and this process's rank and host, as nccl-tests does, because a
// multi-node failure is only actionable when you know where it happened.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

namespace ringpilot::comm {

/// A failed MPI/CUDA/NCCL call during setup.
class CommError : public std::runtime_error {
 public:
  explicit CommError(const std::string& what) : std::runtime_error(what) {}
};

/// "rank R on HOST" for messages; the rank comes from the launcher environment so it
/// works before MPI_Init and after MPI_Finalize.
std::string ProcessLocation();

[[noreturn]] void ThrowMpiError(const char* call, int rc, const char* file, int line);
/// CommError "FILE:LINE: CALL failed: WHY (rank R on HOST)"; CUDA_CHECK and NCCL_CHECK
/// pass the library's own error string as WHY.
[[noreturn]] void ThrowCallError(const char* call, const char* why, const char* file, int line);
/// Hot-path variant: prints the message and aborts the whole MPI job (no throwing).
[[noreturn]] void AbortOnMpiError(const char* call, int rc, const char* file, int line);

/// Where a rank's last words go before a hot-path abort, besides stderr: the trainer's
/// rank log (its FATAL line names the first failing rank to the launcher). Called at most
/// once, from whichever thread aborts (the training thread, NCCL's watchdog).
using FatalReporter = void (*)(const std::string& message);
/// Installs `reporter` (nullptr: stderr only). Not synchronised with AbortJob: install it
/// before the communicators start.
void SetFatalReporter(FatalReporter reporter);

/// Ends the whole job from a hot path (no throwing): `message` + " (rank R on HOST)" to
/// the FatalReporter (else stderr), then `after_report` when given (last clean-up that may
/// block: the report is out first), then MPI_Abort(MPI_COMM_WORLD, status) and
/// _Exit(status).
[[noreturn]] void AbortJob(const std::string& message, int status,
                           const std::function<void()>& after_report = {});

}  // namespace ringpilot::comm

#define MPI_CHECK(call)                                                           \
  do {                                                                            \
    int ringpilot_rc_ = (call);                                                   \
    if (ringpilot_rc_ != MPI_SUCCESS)                                             \
      ::ringpilot::comm::ThrowMpiError(#call, ringpilot_rc_, __FILE__, __LINE__); \
  } while (0)

#define MPI_CHECK_FATAL(call)                                                       \
  do {                                                                              \
    int ringpilot_rc_ = (call);                                                     \
    if (ringpilot_rc_ != MPI_SUCCESS)                                               \
      ::ringpilot::comm::AbortOnMpiError(#call, ringpilot_rc_, __FILE__, __LINE__); \
  } while (0)

// Setup-path checks of CUDA runtime and NCCL calls (the caller includes cuda_runtime.h or
// nccl.h); hot paths abort instead, in their own way.
#define CUDA_CHECK(call)                                                                   \
  do {                                                                                     \
    cudaError_t ringpilot_e_ = (call);                                                     \
    if (ringpilot_e_ != cudaSuccess)                                                       \
      ::ringpilot::comm::ThrowCallError(#call, cudaGetErrorString(ringpilot_e_), __FILE__, \
                                        __LINE__);                                         \
  } while (0)

#define NCCL_CHECK(call)                                                                   \
  do {                                                                                     \
    ncclResult_t ringpilot_r_ = (call);                                                    \
    if (ringpilot_r_ != ncclSuccess)                                                       \
      ::ringpilot::comm::ThrowCallError(#call, ncclGetErrorString(ringpilot_r_), __FILE__, \
                                        __LINE__);                                         \
  } while (0)
