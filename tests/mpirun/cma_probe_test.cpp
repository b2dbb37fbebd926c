#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

#include <gtest/gtest.h>

#include "base/subprocess.h"
#include "mpirun/cma_probe.h"

namespace ringpilot::mpirun {
namespace {

constexpr int kSkip = 3;

// In a child whose seccomp filter refuses process_vm_readv (as container runtimes'
// default profiles do), the probe's exit status: 0 "works", 1 "does not", kSkip when the
// filter could not be installed.
int ProbeUnderSeccompDenial() {
  const base::ProcessStatus status =
      base::Subprocess::Fork([] {
        sock_filter filter[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
          return kSkip;
        }
        return CrossMemoryAttachWorks() ? 0 : 1;
      }).Wait();
  return status.exit_code;
}

TEST(CmaProbe, RefusedSystemCallMeansNo) {
  const int code = ProbeUnderSeccompDenial();
  if (code == kSkip) GTEST_SKIP() << "cannot install a seccomp filter here";
  EXPECT_EQ(code, 1);
}

TEST(CmaProbe, AnswersTheSameTwiceAndLeavesNoChildBehind) {
  const bool first = CrossMemoryAttachWorks();
  EXPECT_EQ(CrossMemoryAttachWorks(), first);
  // Both children were reaped: nothing is left to wait for.
  errno = 0;
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace ringpilot::mpirun
