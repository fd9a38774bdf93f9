// Harmony's server presets under contention, on both engines (the fast engine in process, SimGrid in a child): two
// concurrent p2p transfers gpu0 -> gpu2 and gpu1 -> gpu3 share the switches' uplinks in the two-switch reading of the
// 4x1080 Ti tree, stay under the one switch in the single-uplink reading, and meet only on NVSwitch ports on a DGX-2.
#include "engine_comparison.hpp"

#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/plan.hpp"

#include <gtest/gtest.h>

#include <string>

namespace memsim {
namespace {

constexpr double kBytes = 100e6;
constexpr double kLaunch = 5e-6; // the presets' kernel launch: each send follows its producer's (zero-time) kernel
constexpr double kPcie = 11.5 * 1024 * 1024 * 1024; // the 1080 Ti presets' links, bytes/s

const std::string kTrace = R"({"format": "memsim-trace", "version": 1, "name": "t", "source": {"device": "test-gpu"},
  "tensors": [{"id": 0, "name": "x", "bytes": 1000, "kind": "input"},
              {"id": 1, "name": "a", "bytes": 100000000, "kind": "activation"},
              {"id": 2, "name": "b", "bytes": 100000000, "kind": "activation"}],
  "ops": [{"id": 0, "name": "f", "phase": "forward", "inputs": [0], "outputs": [1], "time_s": 0},
          {"id": 1, "name": "g", "phase": "forward", "inputs": [0], "outputs": [2], "time_s": 0}]})";

// gpu0 sends a to gpu2 while gpu1 sends b to gpu3.
const std::string kPlan = R"({"format": "memsim-plan", "version": 1, "trace": "t", "machine": "m", "planner": "hand",
  "steps": [{"id": 0, "kind": "compute", "op": 0, "device": 0, "deps": []},
            {"id": 1, "kind": "compute", "op": 1, "device": 1, "deps": []},
            {"id": 2, "kind": "send", "tensor": 1, "device": 0, "peer": 2, "deps": [0]},
            {"id": 3, "kind": "send", "tensor": 2, "device": 1, "peer": 3, "deps": [1]},
            {"id": 4, "kind": "recv", "tensor": 1, "device": 2, "peer": 0, "deps": [2]},
            {"id": 5, "kind": "recv", "tensor": 2, "device": 3, "peer": 1, "deps": [3]}]})";

// The end of both sends on `preset`, after checking that the two engines agree.
std::pair<double, double> send_ends(const std::string& preset)
{
  const Machine machine = load_machine_or_preset(preset, default_presets_dir());
  const Trace trace = trace_from_text(kTrace, "test.trace.json");
  const Plan plan = plan_from_text(kPlan, "test.plan.json");
  SCOPED_TRACE(preset);
  const RunResult fast = test::run_on_both_engines(trace, machine, plan).fast;
  EXPECT_FALSE(fast.error) << preset << ": " << fast.error->message;
  return {fast.timeline.at(2).end_s, fast.timeline.at(3).end_s};
}

TEST(HarmonyPresetsSim, CrossSwitchTransfersHalveOnTheSharedUplinks)
{
  // gpu0-plx0, plx0-host, plx1-host, gpu2-plx1: 1 + 9 + 9 + 1 us; both flows cross plx0-host up and plx1-host down.
  const auto [first, second] = send_ends("4x1080ti-pcie-tree");
  EXPECT_NEAR(first, kLaunch + 20e-6 + 2 * kBytes / kPcie, 1e-9);
  EXPECT_NEAR(second, first, 1e-12);
}

TEST(HarmonyPresetsSim, UnderOneSwitchTheTransfersDoNotMeet)
{
  const auto [first, second] = send_ends("4x1080ti-pcie-1switch");
  EXPECT_NEAR(first, kLaunch + 2e-6 + kBytes / kPcie, 1e-9);
  EXPECT_NEAR(second, first, 1e-12);
}

TEST(HarmonyPresetsSim, Dgx2TransfersRunAtTheNvswitchPortRate)
{
  const auto [first, second] = send_ends("dgx2");
  EXPECT_NEAR(first, kLaunch + 2e-6 + kBytes / 150e9, 1e-9);
  EXPECT_NEAR(second, first, 1e-12);
}

} // namespace
} // namespace memsim
