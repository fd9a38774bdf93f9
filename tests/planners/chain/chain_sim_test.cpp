// Chain planners end to end: plan generated VGG- and ResNet-style chains, simulate each plan (one SimGrid engine
// per process, so in a forked child), and compare with the planner's own estimate and the budget.
#include "memsim/common/error.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/generators.hpp"
#include "memsim/traces/views.hpp"
#include "simulate_in_child.hpp"
#include "test_traces.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace memsim {
namespace {

Machine v100() { return load_machine(std::string(MEMSIM_SOURCE_DIR) + "/configs/machines/v100-32gb-pcie3.yaml"); }

Trace cnn(const Machine& machine, int depth, bool residual)
{
  CnnSpec spec;
  spec.depth = depth;
  spec.batch = 32;
  spec.image = 128;
  spec.residual = residual;
  const Gpu& gpu = machine.gpus[0];
  return generate_cnn(spec, Roofline{gpu.peak_flops.at("fp32"), gpu.hbm_bandwidth, gpu.kernel_launch_s, gpu.model});
}

// Sets every host link of the machine to `bandwidth` (slow links make offloading a real trade-off).
Machine with_host_bandwidth(Machine machine, double bandwidth)
{
  for (const RouteHop& hop : machine.route(machine.gpus.at(0).name, kHostNodeName))
    machine.links.at(hop.link).bandwidth = bandwidth;
  return machine;
}

struct Case {
  std::string planner;
  double fraction;
  double estimate;
};

// Weights, their gradients and optimizer state take ~1/4 of these chains' peak and the first layers' activations
// another ~1/3, so the chain planners' range runs from ~0.6 of keep-all's peak up to it.
constexpr double kFractions[] = {1.0, 0.9, 0.8, 0.7, 0.6};

void check_planners_on(const Trace& trace, const Machine& machine, int* simulated, int* refused, double* worst_gap,
                       int* with_transfers)
{
  const std::uint64_t peak = default_memory_profile(trace).peak_bytes;
  std::map<std::pair<std::string, double>, double> estimates;
  for (const char* planner : {"rotor", "pofo", "offload-dp", "autocapper", "opportunist"}) {
    for (double fraction : kFractions) {
      PlanRequest request;
      request.budget_bytes = static_cast<std::uint64_t>(fraction * static_cast<double>(peak));
      request.params = {{"levels", 50}};
      Plan plan;
      try {
        plan = make_plan(planner, trace, machine, request);
      } catch (const Infeasible& error) {
        EXPECT_NE(std::string(error.what()).find("no plan fits: minimum memory is"), std::string::npos) << error.what();
        ++*refused;
        continue;
      }
      ASSERT_TRUE(plan.estimate.iteration_time_s);
      const RunResult result = test::simulate_in_child(trace, machine, plan);
      ASSERT_TRUE(result.metrics.feasible)
          << trace.name << " " << planner << " at " << fraction << ": " << (result.error ? result.error->message : "");
      EXPECT_LE(result.metrics.peak_device_bytes, request.budget_bytes) << planner << " at " << fraction;
      const double estimate = *plan.estimate.iteration_time_s;
      const double gap = std::abs(result.metrics.iteration_time_s - estimate) / estimate;
      *worst_gap = std::max(*worst_gap, gap);
      if (result.metrics.h2d_bytes > 0)
        ++*with_transfers;
      std::printf("%-22s %-12s %.2f x peak: estimate %.9f s, simulated %.9f s, gap %.2e, peak %.3f x budget, "
                  "%.0f MB offloaded\n",
                  trace.name.c_str(), planner, fraction, estimate, result.metrics.iteration_time_s, gap,
                  static_cast<double>(result.metrics.peak_device_bytes) / static_cast<double>(request.budget_bytes),
                  static_cast<double>(result.metrics.d2h_bytes) / 1e6);
      EXPECT_LE(gap, 1e-6) << planner << " at " << fraction;
      estimates[{planner, fraction}] = estimate;
      ++*simulated;
    }
  }
  // pofo's schedules include rotor's and offload-dp's: never slower (its estimate is at most its DP value, which is
  // at most theirs; offload-dp's estimate may sit below its own DP value by the prefetch rounding).
  for (double fraction : kFractions) {
    const auto pofo = estimates.find({"pofo", fraction});
    for (const char* other : {"rotor", "offload-dp", "autocapper"}) {
      const auto found = estimates.find({other, fraction});
      if (found == estimates.end())
        continue;
      ASSERT_NE(pofo, estimates.end()) << "pofo refused a budget " << other << " planned: " << fraction;
      EXPECT_LE(pofo->second, found->second * (1 + 0.01)) << other << " at " << fraction;
    }
  }
}

TEST(ChainPlanners, SimulatedTimeMatchesEstimateAndFitsBudget)
{
  const Machine machine = with_host_bandwidth(v100(), 4e9);
  int simulated = 0, refused = 0, with_transfers = 0;
  double worst_gap = 0;
  check_planners_on(cnn(machine, 10, false), machine, &simulated, &refused, &worst_gap, &with_transfers);
  check_planners_on(cnn(machine, 8, true), machine, &simulated, &refused, &worst_gap, &with_transfers);
  std::printf("simulated %d plans (%d refused), %d with transfers, worst relative gap %.3e\n", simulated, refused,
              with_transfers, worst_gap);
  EXPECT_GE(simulated, 40); // of 50: only the smallest budgets may be refused
  EXPECT_GE(with_transfers, 5);
}

TEST(ChainPlanners, InfeasibleBudgetNamesTheMinimumMemory)
{
  const Machine machine = v100();
  const Trace trace = cnn(machine, 6, false);
  PlanRequest request;
  request.budget_bytes = default_memory_profile(trace).peak_bytes / 20;
  for (const char* planner : {"rotor", "pofo", "offload-dp", "autocapper", "opportunist"}) {
    try {
      make_plan(planner, trace, machine, request);
      ADD_FAILURE() << planner << " planned with 5% of the peak";
    } catch (const Infeasible& error) {
      EXPECT_NE(std::string(error.what()).find("no plan fits: minimum memory is"), std::string::npos) << error.what();
    }
  }
}

// Regression (DenseNet-121 trace, offload-dp at 0.5 of its peak): a layer output that no backward op reads (there,
// pool0's output, read only by the concatenations of the next dense block, whose backward does not need it) is still
// part of its layer's item, so an offload-only plan offloads and prefetches it. The plan used to free the prefetched
// copy on the compute stream before the prefetch step itself: the simulator refused it ("not resident").
TEST(ChainPlanners, PrefetchedTensorThatNoBackwardReadsIsFreedAfterItArrives)
{
  Trace trace = test::make_chain(6, 100'000'000);
  TensorId unread = -1;
  for (Op& op : trace.ops)
    if (op.phase == Phase::backward && op.layer == 3) {
      unread = op.inputs[1]; // a2, the input of layer 3: now read by f3 only
      op.inputs.erase(op.inputs.begin() + 1);
    }
  ASSERT_GE(unread, 0);
  ASSERT_EQ(trace.tensor(unread).name, "a2");
  validate_trace(trace, trace.name);
  // A link fast enough for a2's offload to end (and free it) long before the backward: a free of the absent tensor
  // then fails in simulation too.
  const Machine machine = with_host_bandwidth(v100(), 100e9);
  const std::uint64_t peak = default_memory_profile(trace).peak_bytes;
  int prefetched_unread = 0;
  for (const char* planner : {"offload-dp", "pofo"}) {
    for (double fraction : {0.9, 0.8, 0.7, 0.6, 0.5, 0.4}) {
      PlanRequest request;
      request.budget_bytes = static_cast<std::uint64_t>(fraction * static_cast<double>(peak));
      Plan plan;
      try {
        plan = make_plan(planner, trace, machine, request);
      } catch (const Infeasible&) {
        continue;
      }
      // In plan order (deps first, each stream in order) the tensor must be resident exactly when freed and absent
      // when prefetched.
      bool prefetches_unread = false;
      bool resident = false;
      for (const Step& step : plan.steps) {
        if (step_names_op(step.kind)) {
          const auto& outputs = trace.op(*step.op).outputs;
          if (std::find(outputs.begin(), outputs.end(), unread) != outputs.end())
            resident = true;
        } else if (step.tensor == unread && step.kind == StepKind::prefetch) {
          EXPECT_FALSE(resident) << planner << " at " << fraction << ": step " << step.id << " prefetches a2 twice";
          resident = prefetches_unread = true;
        } else if (step.tensor == unread && step.kind == StepKind::free) {
          EXPECT_TRUE(resident) << planner << " at " << fraction << ": step " << step.id << " on " << step.stream
                                << " frees a2 where it is not resident";
          resident = false;
        }
      }
      prefetched_unread += prefetches_unread ? 1 : 0;
      const RunResult result = test::simulate_in_child(trace, machine, plan);
      ASSERT_TRUE(result.metrics.feasible)
          << planner << " at " << fraction << ": " << (result.error ? result.error->message : "");
      EXPECT_LE(result.metrics.peak_device_bytes, request.budget_bytes) << planner << " at " << fraction;
      const double estimate = *plan.estimate.iteration_time_s;
      EXPECT_LE(std::abs(result.metrics.iteration_time_s - estimate) / estimate, 1e-6) << planner << " at " << fraction;
    }
  }
  EXPECT_GE(prefetched_unread, 1); // the case above was exercised
}

// Layer 2 reads layer 0's output: a skip edge, no chain at layer granularity.
Trace skip_trace()
{
  Trace trace = test::make_chain(3, 1000);
  for (Op& op : trace.ops)
    if (op.phase == Phase::forward && op.layer == 2)
      op.inputs.push_back(trace.ops[0].outputs[0]);
  validate_trace(trace, trace.name);
  return trace;
}

TEST(ChainPlanners, NonChainTraceIsBadInput)
{
  const Machine machine = v100();
  const Trace trace = skip_trace();
  EXPECT_THROW(chain_view(trace), Infeasible);
  PlanRequest request;
  for (const char* planner : {"rotor", "pofo", "offload-dp", "autocapper", "opportunist"}) {
    try {
      make_plan(planner, trace, machine, request);
      ADD_FAILURE() << planner << " planned a trace without a chain view";
    } catch (const InputError& error) {
      EXPECT_NE(std::string(error.what()).find("no chain view"), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find("skips layers"), std::string::npos) << error.what();
    }
  }
}

} // namespace
} // namespace memsim
