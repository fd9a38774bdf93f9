// The plain-C++ pilot (dynn/pilot_model.hpp) against the libtorch model it was saved from: on held-out iterations the
// same labels (within 1e-5) and the same decoded blocks. A pilot trained until it predicts every iteration of a
// trace exactly makes dynn-offload's prediction=pilot run exactly as prediction=oracle.
#include "dynamic_specs.hpp"
#include "test_files.hpp"
#include "test_machines.hpp"

#include "memsim/pilot/pilot.hpp"
#include "memsim/planners/dynn/pilot_model.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/dynamic_generators.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace memsim::pilot {
namespace {

const Roofline kRoofline{14e12, 900e9, 5e-6, "test-gpu"};
const dynn::PilotShape kShape{16, 8};

Trace lstm_trace(int iterations, std::uint64_t seed)
{
  VarLstmSpec spec = test::small_var_lstm(iterations, 2, 6, 64);
  spec.seed = seed;
  return generate_var_lstm(spec, kRoofline);
}

Machine lstm_machine()
{
  Machine machine = test::one_gpu_machine();
  machine.links[0].latency_s = 1e-6;
  return machine;
}

constexpr std::uint64_t kBudget = 1024 * 1024; // two buffers of 512 KiB

PilotModel trained_on(const std::vector<dynn::PilotSample>& samples)
{
  PilotConfig config;
  config.hidden = 32;
  config.epochs = 600;
  config.seed = 5;
  PilotModel model(kShape, config);
  model.train(samples);
  return model;
}

TEST(PilotInference, PlainForwardPassPredictsAsLibtorch)
{
  const Machine machine = lstm_machine();
  const std::vector<dynn::PilotSample> train =
      dynn::pilot_samples(lstm_trace(12, 3), machine, kBudget / 2, dynn::NetworkType::lstm, kShape);
  const std::vector<dynn::PilotSample> held_out =
      dynn::pilot_samples(lstm_trace(12, 9), machine, kBudget / 2, dynn::NetworkType::lstm, kShape);
  const PilotModel model = trained_on(train);
  nlohmann::json document = model.to_json();
  document["provenance"] = {{"type", "lstm"}};
  const dynn::PilotInference plain = dynn::PilotInference::from_json(document, "trained");
  EXPECT_EQ(plain.default_type(), dynn::NetworkType::lstm);
  const std::vector<double> label_scale = document["normalization"]["label"]["scale"].get<std::vector<double>>();
  std::size_t present = 0;
  for (const dynn::PilotSample& sample : held_out) {
    SCOPED_TRACE(sample.iteration);
    const std::vector<double> expected = model.predict(sample.input, sample.type);
    const std::vector<double> actual = plain.predict(sample.input, sample.type);
    ASSERT_EQ(actual.size(), expected.size());
    // libtorch runs in float32: its error is relative to the network's output, i.e. to the label's spread.
    for (std::size_t i = 0; i < actual.size(); ++i)
      EXPECT_NEAR(actual[i], expected[i], 1e-5 * std::max({1.0, std::abs(expected[i]), label_scale[i]})) << i;
    EXPECT_EQ(dynn::partition_from_label(actual, sample.op_count),
              dynn::partition_from_label(expected, sample.op_count));
    present += dynn::partition_from_label(actual, sample.op_count).has_value();
  }
  EXPECT_GT(present, 0u) << "some held-out predictions should decode to blocks";
}

double online_time(const Trace& trace, const Machine& machine, const std::string& policy_params)
{
  const Plan plan = make_plan(
      "online", trace, machine,
      PlanRequest{kBudget, 1, {{"policy", "dynn-offload"}, {"policy_params", policy_params}, {"start_on_host", true}}});
  EXPECT_TRUE(plan.estimate.iteration_time_s);
  return plan.estimate.iteration_time_s.value_or(0);
}

TEST(PilotInference, ExactPilotRunsAsTheOracle)
{
  const Machine machine = lstm_machine();
  const Trace trace = lstm_trace(6, 4);
  const std::vector<dynn::PilotSample> samples =
      dynn::pilot_samples(trace, machine, kBudget / 2, dynn::NetworkType::lstm, kShape);
  const PilotModel model = trained_on(samples);
  ASSERT_EQ(evaluate(model, samples).exact, samples.size()) << "the pilot should fit its six iterations";
  const test::ScratchDir dir;
  save_pilot(model, {{"type", "lstm"}}, dir / "pilot.json");
  const double oracle = online_time(trace, machine, "prediction=oracle");
  const double pilot = online_time(trace, machine, "prediction=pilot,pilot_model=" + (dir / "pilot.json").string());
  EXPECT_GT(oracle, 0);
  EXPECT_DOUBLE_EQ(pilot, oracle);
}

} // namespace
} // namespace memsim::pilot
