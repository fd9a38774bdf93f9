// μ-TWO's ring search kept in PlanRequest::state_dir (planners/src/mu_two/ring_state.hpp) on a hand-made chain: a
// search stopped midway (here the progress listener throws at round 25, right after the state was saved, as a kill
// would stop it) resumes from that round, holds at round 50 the very state of a search never stopped, and ends with
// its plan; the folder is empty once the search ends; a state of other inputs (another budget) is not read; a damaged
// state is refused, naming its file.
#include "planner_test_support.hpp"
#include "test_files.hpp"
#include "test_traces.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/files.hpp"
#include "memsim/sim/simulator.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace memsim {
namespace {

constexpr std::uint64_t MB = 1000000;
constexpr int kLayers = 24;
constexpr int kModels = 6;

struct Stopped : std::runtime_error {
  Stopped() : std::runtime_error("stopped") {}
};

const nlohmann::json& ring_params()
{
  static const nlohmann::json params = {{"models", kModels}, {"include_full_fusion", false}, {"partitions", "finest"}};
  return params;
}

const Trace& chain()
{
  static const Trace trace = test::make_chain(kLayers, MB);
  return trace;
}

// A ring search that runs past round 50 and fits: keep-all's peak less 1/`cut` under a host link of `link` B/s.
struct Search {
  const char* name;
  double link;
  int cut;
};
// 1 GB/s: swaps that multiplex the next sub-array's forward; 30 MB/s: recomputations too.
void PrintTo(const Search& search, std::ostream* out) { *out << search.name; }
const Search kSearches[] = {{"FastLinkSwaps", 1e9, 3}, {"SlowLinkRecomputes", 3e7, 2}};

class MuTwoResume : public ::testing::TestWithParam<Search> {
protected:
  Machine machine() const { return test::one_gpu_machine(1ull << 34, GetParam().link); }

  Plan plan_ring(std::uint64_t budget, const std::filesystem::path& state_dir = {},
                 std::function<void(const std::string&)> progress = nullptr) const
  {
    PlanRequest request;
    request.budget_bytes = budget;
    request.params = ring_params();
    request.state_dir = state_dir;
    request.progress = std::move(progress);
    return make_plan("mu-two", chain(), machine(), request);
  }

  std::uint64_t tight_budget() const
  {
    SimOptions options;
    options.engine = EngineKind::fast;
    const std::uint64_t keep_all =
        simulate(chain(), machine(), plan_ring(1ull << 34), options).metrics.peak_device_bytes;
    return keep_all - keep_all / static_cast<std::uint64_t>(GetParam().cut);
  }

  // Stops the search at `round` (a multiple of 25, where the state is saved); returns the status line it stopped on.
  std::string stop_at_round(std::size_t round, std::uint64_t budget, const std::filesystem::path& state_dir) const
  {
    const std::string marker = fmt::format(": round {},", round);
    std::string stopped_on;
    EXPECT_THROW(plan_ring(budget, state_dir,
                           [&](const std::string& status) {
                             if (status.find(marker) != std::string::npos) {
                               stopped_on = status;
                               throw Stopped();
                             }
                           }),
                 Stopped);
    return stopped_on;
  }
};

std::vector<std::filesystem::path> files_in(const std::filesystem::path& folder)
{
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

const std::string kLabel = "ring " + std::to_string(kModels) + "x1";

TEST_P(MuTwoResume, AStoppedSearchResumesWithTheSamePlan)
{
  const std::uint64_t budget = tight_budget();
  const Plan uninterrupted = plan_ring(budget);

  // The state of a search never stopped, at round 50.
  const test::ScratchDir never_stopped;
  ASSERT_FALSE(stop_at_round(50, budget, never_stopped.path()).empty()) << "the search ended before round 50";
  const std::vector<std::filesystem::path> reference = files_in(never_stopped.path());
  ASSERT_EQ(reference.size(), 1u);

  // Stopped at round 25, the search left its state: the round and the decisions of the line it stopped on.
  const test::ScratchDir dir;
  const std::string stopped_on = stop_at_round(25, budget, dir.path());
  const std::vector<std::filesystem::path> saved = files_in(dir.path());
  ASSERT_EQ(saved.size(), 1u);
  const std::string name = saved[0].filename().string();
  EXPECT_EQ(name, reference[0].filename().string()); // the file is named by the ring and its inputs
  EXPECT_EQ(name.rfind("mu-two-ring-" + std::to_string(kModels) + "x1-", 0), 0u) << name;
  const nlohmann::json state = nlohmann::json::parse(read_text_file(saved[0]));
  EXPECT_EQ(state.at("round"), 25);
  const std::size_t decisions = state.at("decisions").size();
  EXPECT_GT(decisions, 0u);
  EXPECT_EQ(stopped_on.rfind(fmt::format("{}: round 25, {} decisions, ", kLabel, decisions), 0), 0u) << stopped_on;

  // Resumed, it says so, goes on from round 25, and by round 50 holds exactly the never-stopped search's state.
  std::vector<std::string> lines;
  EXPECT_THROW(plan_ring(budget, dir.path(),
                         [&](const std::string& status) {
                           lines.push_back(status);
                           if (status.find(": round 50,") != std::string::npos)
                             throw Stopped();
                         }),
               Stopped);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            fmt::format("{}: resumed at round 25 with {} decisions from {}", kLabel, decisions, saved[0].string()));
  EXPECT_EQ(lines[1].rfind(fmt::format("{}: round 25, {} decisions, ", kLabel, decisions), 0), 0u) << lines[1];
  EXPECT_EQ(read_text_file(saved[0]), read_text_file(reference[0]));
  const nlohmann::json at_50 = nlohmann::json::parse(read_text_file(saved[0]));
  if (GetParam().link < 1e8) { // the case covers recomputation
    EXPECT_NE(at_50.at("dropped").dump(), nlohmann::json::array({{}, {}, {}, {}, {}, {}}).dump());
  } else { // and multiplexing
    EXPECT_GT(at_50.at("multiplexed_ops").get<std::size_t>(), 0u);
  }

  // Resumed again, it ends with the plan of the search never stopped, and leaves nothing behind.
  const Plan resumed = plan_ring(budget, dir.path());
  EXPECT_EQ(plan_to_json(resumed), plan_to_json(uninterrupted));
  EXPECT_TRUE(files_in(dir.path()).empty()) << "the finished search leaves its state behind";
}

TEST_P(MuTwoResume, AStateOfOtherInputsIsNotRead)
{
  const test::ScratchDir dir;
  const std::uint64_t budget = tight_budget();
  ASSERT_FALSE(stop_at_round(50, budget, dir.path()).empty());
  const std::vector<std::filesystem::path> saved = files_in(dir.path());
  ASSERT_EQ(saved.size(), 1u);
  const std::string before = read_text_file(saved[0]);

  std::vector<std::string> lines; // another budget: another fingerprint, a search from round 0
  EXPECT_THROW(plan_ring(budget - MB, dir.path(),
                         [&](const std::string& status) {
                           lines.push_back(status);
                           throw Stopped();
                         }),
               Stopped);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind(kLabel + ": round 0, 0 decisions, ", 0), 0u) << lines[0];
  EXPECT_EQ(files_in(dir.path()), saved);
  EXPECT_EQ(read_text_file(saved[0]), before);
}

TEST_P(MuTwoResume, ADamagedStateIsRefusedNamingItsFile)
{
  const test::ScratchDir dir;
  const std::uint64_t budget = tight_budget();
  ASSERT_FALSE(stop_at_round(50, budget, dir.path()).empty());
  const std::filesystem::path file = files_in(dir.path()).at(0);
  nlohmann::json state = nlohmann::json::parse(read_text_file(file));

  auto expect_refused = [&](const std::string& text, const std::string& why) {
    write_text_file(file, text);
    try {
      plan_ring(budget, dir.path());
      ADD_FAILURE() << "a damaged state was read: " << why;
    } catch (const InputError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(file.string()), std::string::npos) << message;
      EXPECT_NE(message.find(why), std::string::npos) << message;
      EXPECT_NE(message.find("delete it to search afresh"), std::string::npos) << message;
    }
  };
  expect_refused(state.dump().substr(0, 40), "parse error");
  nlohmann::json past = state;
  past["dropped"][0].push_back(kLayers * 100);
  expect_refused(past.dump(), fmt::format("'dropped' of sub-array 0 names {}, past its", kLayers * 100));
  nlohmann::json other = state;
  other["fingerprint"] = "0123456789abcdef";
  expect_refused(other.dump(), "the state of other inputs (fingerprint 0123456789abcdef");
}

INSTANTIATE_TEST_SUITE_P(Rings, MuTwoResume, ::testing::ValuesIn(kSearches),
                         [](const auto& info) { return std::string(info.param.name); });

} // namespace
} // namespace memsim
