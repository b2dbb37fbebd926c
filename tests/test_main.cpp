// gtest entry point for every unit test binary. It points RINGPILOT_SOURCE_DIR and
// RINGPILOT_BUILD_DIR at this build's trees unless the environment already says, so a
// test binary run by hand finds its fixtures as it does under ctest.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  setenv("RINGPILOT_SOURCE_DIR", RINGPILOT_TEST_SOURCE_DIR, /*overwrite=*/0);
  setenv("RINGPILOT_BUILD_DIR", RINGPILOT_TEST_BUILD_DIR, /*overwrite=*/0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
