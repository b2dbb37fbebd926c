#include "slurm/nodelist.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace ringpilot::slurm {
namespace {

using Hosts = std::vector<std::string>;

TEST(ExpandNodelist, SingleHost) { EXPECT_EQ(ExpandNodelist("node7"), Hosts{"node7"}); }

TEST(ExpandNodelist, PlainCommaList) {
  EXPECT_EQ(ExpandNodelist("a,b.example.org,c-1"), (Hosts{"a", "b.example.org", "c-1"}));
}

TEST(ExpandNodelist, RangesAndSingletonsInOneGroup) {
  EXPECT_EQ(ExpandNodelist("n[1-3,5]"), (Hosts{"n1", "n2", "n3", "n5"}));
}

TEST(ExpandNodelist, ZeroPaddingIsKept) {
  EXPECT_EQ(ExpandNodelist("gpu[01-02],cpu7"), (Hosts{"gpu01", "gpu02", "cpu7"}));
  EXPECT_EQ(ExpandNodelist("n[08-11]"), (Hosts{"n08", "n09", "n10", "n11"}));
  EXPECT_EQ(ExpandNodelist("n[001-002,010]"), (Hosts{"n001", "n002", "n010"}));
}

TEST(ExpandNodelist, UnpaddedRangeGrowsInWidth) {
  EXPECT_EQ(ExpandNodelist("n[9-11]"), (Hosts{"n9", "n10", "n11"}));
}

TEST(ExpandNodelist, SuffixAfterBrackets) {
  EXPECT_EQ(ExpandNodelist("rack[1-2]-ib"), (Hosts{"rack1-ib", "rack2-ib"}));
}

TEST(ExpandNodelist, SeveralGroupsExpandAsCartesianProductLeftmostSlowest) {
  EXPECT_EQ(ExpandNodelist("a[1-2]-ib[3-4]"), (Hosts{"a1-ib3", "a1-ib4", "a2-ib3", "a2-ib4"}));
  EXPECT_EQ(ExpandNodelist("r[1-2]n[01,03]"), (Hosts{"r1n01", "r1n03", "r2n01", "r2n03"}));
}

TEST(ExpandNodelist, SeveralPatternsMixed) {
  EXPECT_EQ(ExpandNodelist("n[1-2],gpu[10-11],login"),
            (Hosts{"n1", "n2", "gpu10", "gpu11", "login"}));
}

TEST(ExpandNodelist, SingleNumberRange) { EXPECT_EQ(ExpandNodelist("n[4-4]"), Hosts{"n4"}); }

// Each malformed list throws and the message names the list and a position.
void ExpectMalformed(const std::string& list, const std::string& fragment) {
  try {
    ExpandNodelist(list);
    ADD_FAILURE() << "no exception for '" << list << "'";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'" + list + "'"), std::string::npos) << what;
    EXPECT_NE(what.find("position"), std::string::npos) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(ExpandNodelist, MalformedListsThrow) {
  ExpectMalformed("n[1-", "position 5: list ends inside brackets");
  ExpectMalformed("n[3-1]", "runs backwards");
  ExpectMalformed("n[a]", "position 3: expected a number, found 'a'");
  ExpectMalformed("", "empty");
  ExpectMalformed("   ", "empty");
  ExpectMalformed("n[1", "position 2: '[' is never closed");
  ExpectMalformed("n1]", "position 3: ']' without a matching '['");
  ExpectMalformed("n[]", "empty item");
  ExpectMalformed("n[1,]", "empty item");
  ExpectMalformed("n[[1]]", "nested");
  ExpectMalformed("n1,,n2", "position 4: empty host name");
  ExpectMalformed("n1,", "empty host name");
  ExpectMalformed(",n1", "position 1: empty host name");
  ExpectMalformed("n[1-2-3]", "expected ',' or ']'");
  ExpectMalformed("n[1-x]", "expected a number");
  ExpectMalformed("n 1", "white space");
  ExpectMalformed("n[1-99999999]", "larger than");
  ExpectMalformed("n[1234567890123456789]", "too many digits");
}

TEST(ExpandNodelist, CartesianProductIsBounded) {
  EXPECT_THROW(ExpandNodelist("a[1-2000]b[1-2000]"), std::invalid_argument);
}

TEST(ExpandTasksPerNode, RepeatsAndSingles) {
  EXPECT_EQ(ExpandTasksPerNode("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(ExpandTasksPerNode("4"), (std::vector<int>{4}));
  EXPECT_EQ(ExpandTasksPerNode("1,3(x2),2"), (std::vector<int>{1, 3, 3, 2}));
}

TEST(ExpandTasksPerNode, MalformedThrows) {
  for (const std::string bad : {"", "2(x", "2(3)", "2(x0)", "0", "a", "2,", "2(x2", "2)"}) {
    EXPECT_THROW(ExpandTasksPerNode(bad), std::invalid_argument) << bad;
  }
  try {
    ExpandTasksPerNode("2(y3)");
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'2(y3)' at position 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ringpilot::slurm
