// logs/rank-N.heartbeat (history/trainer_beat.h): what the trainer formats is what the
// launcher reads back; a loss JSON cannot spell is null; old, malformed and foreign files
// are left out.
#include "history/trainer_beat.h"

#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace ringpilot::history {
namespace {

using testing::TempDir;
using testing::WriteFile;

std::string Format(const TrainerBeat& beat) {
  char buffer[512];
  const size_t n = FormatTrainerBeat(beat, buffer, sizeof buffer);
  return std::string(buffer, n);
}

TrainerBeat Sample(int rank, double unix) {
  TrainerBeat b;
  b.rank = rank;
  b.step = 41;
  b.steps = 400;
  b.phase = "checkpoint";
  b.unix = unix;
  b.max_silence_s = 1.25;
  b.loss = 2.375;
  b.collectives_started = 1234;
  b.collectives_completed = 1233;
  return b;
}

TEST(TrainerBeat, WhatIsWrittenIsReadBack) {
  TempDir dir;
  WriteFile(TrainerBeatPath(dir.path(), 0), Format(Sample(0, 1700000000.5)));
  WriteFile(TrainerBeatPath(dir.path(), 12), Format(Sample(12, 1700000001.25)));
  const auto beats = ReadTrainerBeats(dir.path(), 0);
  ASSERT_EQ(beats.size(), 2u);
  const TrainerBeat& b = beats.at(12);
  EXPECT_EQ(b.rank, 12);
  EXPECT_EQ(b.step, 41);
  EXPECT_EQ(b.steps, 400);
  EXPECT_EQ(b.phase, "checkpoint");
  EXPECT_DOUBLE_EQ(b.unix, 1700000001.25);
  EXPECT_DOUBLE_EQ(b.max_silence_s, 1.25);
  ASSERT_TRUE(b.loss.has_value());
  EXPECT_DOUBLE_EQ(*b.loss, 2.375);
  EXPECT_EQ(b.collectives_started, 1234u);
  EXPECT_EQ(b.collectives_completed, 1233u);
  EXPECT_EQ(TrainerBeatPath("/r/logs", 3), "/r/logs/rank-3.heartbeat");
}

TEST(TrainerBeat, NoLossNanAndInfinityAreNull) {
  for (const std::optional<double> loss :
       {std::optional<double>(), std::optional<double>(std::nan("")),
        std::optional<double>(std::numeric_limits<double>::infinity())}) {
    TrainerBeat b = Sample(0, 5);
    b.loss = loss;
    const std::string text = Format(b);
    EXPECT_NE(text.find("\"loss\": null"), std::string::npos) << text;
    TempDir dir;
    WriteFile(TrainerBeatPath(dir.path(), 0), text);
    EXPECT_FALSE(ReadTrainerBeats(dir.path(), 0).at(0).loss.has_value());
  }
}

TEST(TrainerBeat, TooSmallABufferWritesNothing) {
  char buffer[16];
  EXPECT_EQ(FormatTrainerBeat(Sample(0, 5), buffer, sizeof buffer), 0u);
}

TEST(TrainerBeat, OldMalformedAndForeignFilesAreLeftOut) {
  TempDir dir;
  WriteFile(TrainerBeatPath(dir.path(), 0), Format(Sample(0, 100)));      // before `since`
  WriteFile(TrainerBeatPath(dir.path(), 1), "{\"step\": 3, \"unix\": ");  // cut short
  WriteFile(TrainerBeatPath(dir.path(), 2), "[1, 2]\n");                  // not an object
  WriteFile(dir.path() + "/rank-3.heartbeat.tmp", Format(Sample(3, 300)));
  WriteFile(dir.path() + "/rank-x.heartbeat", Format(Sample(4, 300)));
  WriteFile(TrainerBeatPath(dir.path(), 5), Format(Sample(5, 300)));
  const auto beats = ReadTrainerBeats(dir.path(), 200);
  ASSERT_EQ(beats.size(), 1u);
  EXPECT_EQ(beats.begin()->first, 5);
  EXPECT_TRUE(ReadTrainerBeats(dir.path() + "/missing", 0).empty());
}

}  // namespace
}  // namespace ringpilot::history
