// base/time.h: the one time format of every log line.
#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "base/time.h"

namespace ringpilot::base {
namespace {

TEST(LogTime, FormatIsIsoUtcWithMilliseconds) {
  using std::chrono::milliseconds;
  const std::chrono::system_clock::time_point t(milliseconds(1700000000123));
  EXPECT_EQ(FormatLogTime(t), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(FormatLogTime(1700000000.0009), "2023-11-14T22:13:20.001Z");  // nearest ms
  EXPECT_EQ(FormatLogTime(1700000000.1234), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(FormatLogTime(0.0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(LogTimeNow().size(), kLogTimeLength);
}

TEST(LogTime, ParseIsTheInverse) {
  EXPECT_EQ(ParseLogTimeNs("2023-11-14T22:13:20.123Z"), 1700000000123000000);
  EXPECT_EQ(ParseLogTimeNs("2023-11-14T22:13:20.123Z INFO rest is ignored"), 1700000000123000000);
  for (int i = 0; i < 1000; ++i) {
    const std::string t = FormatLogTime(1700000000.0 + i * 0.001);
    EXPECT_EQ(FormatLogTime(static_cast<double>(*ParseLogTimeNs(t)) / 1e9), t);
  }
  for (const char* bad :
       {"", "2023-11-14T22:13:20Z", "2023-11-14 22:13:20.123Z", "2023-11-14T22:13:20.123+01",
        "2023-11-14T25:13:20.123Z", "2023-00-14T22:13:20.123Z", "FATAL 123 x"}) {
    EXPECT_FALSE(ParseLogTimeNs(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace ringpilot::base
