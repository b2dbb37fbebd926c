#include "trainer/startup/host_memory.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

// Each test runs in its own process (gtest_discover_tests), so mallopt in one does not
// reach the others.
namespace ringpilot::trainer {
namespace {

constexpr size_t kBlock = 64 << 20;  // over glibc's largest mmap threshold (32 MB)
constexpr long kPages = kBlock / 4096;

long MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Page faults taken by allocating, touching and freeing one large block, after the
// same has been done once before.
long FaultsOfASecondLargeBlock() {
  for (int round = 0;; ++round) {
    const long before = MinorFaults();
    auto* p = static_cast<volatile char*>(std::malloc(kBlock));
    if (p == nullptr) return -1;
    std::memset(const_cast<char*>(p), round + 1, kBlock);
    const long faults = MinorFaults() - before;
    EXPECT_EQ(p[kBlock - 1], round + 1);
    std::free(const_cast<char*>(p));
    if (round == 1) return faults;
  }
}

class HostMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                          "MALLOC_TOP_PAD_", "GLIBC_TUNABLES", "LD_PRELOAD"}) {
      unsetenv(v);
    }
  }
};

#if defined(__GLIBC__)
TEST_F(HostMemoryTest, RetainedMemoryIsReusedWithoutPageFaults) {
  const startup::HostMemoryPolicy p = startup::ConfigureHostMemory(true);
  EXPECT_TRUE(p.applied) << p.detail;
  EXPECT_LT(FaultsOfASecondLargeBlock(), kPages / 10);
}

TEST_F(HostMemoryTest, GlibcDefaultsFaultEveryLargeBlockInAgain) {
  // The baseline the option exists for: without it every round maps fresh pages.
  const startup::HostMemoryPolicy p = startup::ConfigureHostMemory(false);
  EXPECT_FALSE(p.applied);
  EXPECT_NE(p.detail.find("retain_host_memory false"), std::string::npos) << p.detail;
  EXPECT_GT(FaultsOfASecondLargeBlock(), kPages / 2);
}
#endif

TEST_F(HostMemoryTest, TheUsersMallocSettingsWin) {
  setenv("MALLOC_TRIM_THRESHOLD_", "1000000", 1);
  startup::HostMemoryPolicy p = startup::ConfigureHostMemory(true);
  EXPECT_FALSE(p.applied);
  EXPECT_NE(p.detail.find("MALLOC_TRIM_THRESHOLD_=1000000"), std::string::npos) << p.detail;
  unsetenv("MALLOC_TRIM_THRESHOLD_");

  setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_max=4", 1);
  p = startup::ConfigureHostMemory(true);
  EXPECT_FALSE(p.applied);
  EXPECT_NE(p.detail.find("GLIBC_TUNABLES"), std::string::npos) << p.detail;
  // Tunables of other glibc parts do not count.
  setenv("GLIBC_TUNABLES", "glibc.pthread.rseq=0", 1);
  setenv("LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", 1);
  p = startup::ConfigureHostMemory(true);
  EXPECT_FALSE(p.applied);
  EXPECT_NE(p.detail.find("LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"),
            std::string::npos)
      << p.detail;
}

}  // namespace
}  // namespace ringpilot::trainer
