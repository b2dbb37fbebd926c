// base/shell.h: words a POSIX shell splits back unchanged.
#include <gtest/gtest.h>

#include "base/shell.h"

namespace ringpilot::base {
namespace {

TEST(ShellJoin, BareAndQuotedWords) {
  EXPECT_EQ(ShellJoin({"mpirun", "-np", "2", "/a/b.c", "x=1,y:2"}), "mpirun -np 2 /a/b.c x=1,y:2");
  EXPECT_EQ(ShellJoin({"a b", ""}), "'a b' ''");
  EXPECT_EQ(ShellJoin({"it's", "$HOME", "a;b"}), "'it'\\''s' '$HOME' 'a;b'");
}

TEST(ShellSingleQuote, AlwaysQuotes) {
  EXPECT_EQ(ShellSingleQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellSingleQuote(""), "''");
  EXPECT_EQ(ShellSingleQuote("plain"), "'plain'");
}

}  // namespace
}  // namespace ringpilot::base
