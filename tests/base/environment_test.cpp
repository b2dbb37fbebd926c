// base/environment.h: lookups, the execve environment, and PATH resolution.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "base/environment.h"

namespace ringpilot::base {
namespace {

TEST(Environment, LookupFallsBackOnUnsetAndEmpty) {
  const Environment env = {{"A", "1"}, {"EMPTY", ""}};
  EXPECT_EQ(Lookup(env, "A", "x"), "1");
  EXPECT_EQ(Lookup(env, "EMPTY", "x"), "x");
  EXPECT_EQ(Lookup(env, "UNSET", "x"), "x");
}

TEST(Environment, EnvStringsAreSortedNameValuePairs) {
  const Environment env = {{"B", "2"}, {"A", "x=y"}};
  EXPECT_EQ(ToEnvStrings(env), (std::vector<std::string>{"A=x=y", "B=2"}));
}

TEST(Environment, CurrentEnvironmentSeesSetenv) {
  ::setenv("RINGPILOT_BASE_TEST_VAR", "value 1", 1);
  EXPECT_EQ(Lookup(CurrentEnvironment(), "RINGPILOT_BASE_TEST_VAR", ""), "value 1");
  ::unsetenv("RINGPILOT_BASE_TEST_VAR");
}

TEST(Environment, ResolveExecutableSearchesPath) {
  EXPECT_EQ(ResolveExecutable("sh", "/nonexistent:/bin:/usr/bin"), "/bin/sh");
  EXPECT_EQ(ResolveExecutable("no-such-program-xyz", "/bin:/usr/bin"), "");
  EXPECT_EQ(ResolveExecutable("/bin/sh", ""), "/bin/sh");
}

TEST(Environment, SelfPathAndHostName) {
  EXPECT_FALSE(SelfExecutablePath().empty());
  EXPECT_FALSE(HostName().empty());
}

}  // namespace
}  // namespace ringpilot::base
