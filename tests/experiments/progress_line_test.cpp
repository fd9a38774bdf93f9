// The progress line of long commands: one timestamped line per change in `lines` mode (for logs), nothing when off.
#include "memsim/experiments/progress_line.hpp"

#include "test_files.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

namespace memsim::experiments {
namespace {

using memsim::test::lines_of;

TEST(ProgressLine, LinesModeWritesATimestampedLinePerChange)
{
  testing::internal::CaptureStderr();
  {
    ProgressLine progress(Progress::lines);
    EXPECT_TRUE(progress.enabled());
    progress.show("round 0");
    progress.show("round 0"); // unchanged: no second line
    progress.show("round 25");
    progress.clear();          // the log keeps its lines
    progress.show("round 25"); // after a clear the same text is news again
  }
  const std::vector<std::string> lines = lines_of(testing::internal::GetCapturedStderr());
  ASSERT_EQ(lines.size(), 3u);
  const std::regex stamped(R"(\[ *[0-9]+\.[0-9] s\] (.*))");
  const std::vector<std::string> expected{"round 0", "round 25", "round 25"};
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::smatch match;
    ASSERT_TRUE(std::regex_match(lines[i], match, stamped)) << lines[i];
    EXPECT_EQ(match[1], expected[i]);
  }
}

TEST(ProgressLine, OnModeOverwritesOneLineAndOffWritesNothing)
{
  testing::internal::CaptureStderr();
  {
    ProgressLine progress(Progress::on);
    progress.show("probe 1");
    progress.show(std::string(150, 'x')); // longer than the terminal: cut so that it can be erased
    progress.clear();
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "\r\033[Kprobe 1\r\033[K" + std::string(97, 'x') + "...\r\033[K");
  testing::internal::CaptureStderr();
  {
    ProgressLine progress(Progress::off);
    EXPECT_FALSE(progress.enabled());
    progress.show("probe 1");
    progress.clear();
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(ProgressLine, NamesParse)
{
  EXPECT_EQ(progress_from_string("auto"), Progress::automatic);
  EXPECT_EQ(progress_from_string("on"), Progress::on);
  EXPECT_EQ(progress_from_string("lines"), Progress::lines);
  EXPECT_EQ(progress_from_string("off"), Progress::off);
  EXPECT_EQ(progress_from_string("yes"), std::nullopt);
}

} // namespace
} // namespace memsim::experiments
