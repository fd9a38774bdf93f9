// The chain DPs against exhaustive searches on small chains, and their mutual order (pofo <= rotor, offload-dp).
#include "memsim/planners/chain.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <queue>
#include <random>
#include <tuple>

namespace memsim::chain {
namespace {

Problem random_problem(std::mt19937& random, int length, int memory)
{
  Problem problem;
  problem.memory = memory;
  std::uniform_int_distribution<int> size(1, 3), extra(0, 3), overhead(0, 2), quarter(1, 8);
  problem.unit_transfer_time = 0.1 * std::uniform_int_distribution<int>(1, 12)(random);
  for (int l = 0; l < length; ++l) {
    Stage stage;
    stage.forward_time = 0.25 * quarter(random);
    stage.backward_time = 0.25 * quarter(random);
    stage.output = size(random);
    stage.saved = stage.output + extra(random);
    stage.forward_overhead = overhead(random);
    stage.backward_overhead = overhead(random);
    problem.stages.push_back(stage);
  }
  return problem;
}

// Dijkstra over every state of the persistent remat model: checkpoints C, F_all results S, current gradient g.
double exhaustive_remat(const Problem& problem)
{
  const int length = problem.length();
  using State = std::tuple<unsigned, unsigned, int>;
  auto in_use = [&](unsigned kept, unsigned all, int gradient) {
    int total = problem.output(gradient);
    for (int l = 1; l <= length; ++l) {
      if (kept >> l & 1U)
        total += problem.stage(l).output;
      if (all >> l & 1U)
        total += problem.stage(l).saved;
    }
    return total;
  };
  std::map<State, double> distance;
  using Item = std::pair<double, State>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
  const State start{0U, 0U, length};
  if (in_use(0, 0, length) > problem.memory)
    return infinite_time;
  distance[start] = 0;
  queue.push({0.0, start});
  while (!queue.empty()) {
    const auto [time, state] = queue.top();
    queue.pop();
    if (time > distance[state])
      continue;
    const auto [kept, all, gradient] = state;
    if (gradient == 0)
      return time;
    const int used = in_use(kept, all, gradient);
    // Bindings are captured by init-captures: clang 14 cannot capture a structured binding.
    auto relax = [&, time = time](State next, double cost) {
      auto found = distance.find(next);
      if (found == distance.end() || time + cost < found->second - 1e-12) {
        distance[next] = time + cost;
        queue.push({time + cost, next});
      }
    };
    auto available = [kept = kept, all = all](int layer) {
      return layer == 0 || (kept >> layer & 1U) || (all >> layer & 1U);
    };
    for (int l = 1; l <= gradient; ++l) {
      const Stage& stage = problem.stage(l);
      const unsigned bit = 1U << l;
      if (available(l - 1) && !(kept & bit) && !(all & bit) &&
          used + stage.saved + stage.forward_overhead <= problem.memory) {
        relax({kept | bit, all, gradient}, stage.forward_time);
        relax({kept, all | bit, gradient}, stage.forward_time);
      }
      // Dropping a checkpoint is free, except the input of an F_all layer: the framework saved it with abar
      // (PyTorch keeps an op's inputs for its backward), so it stays until that backward.
      if ((kept & bit) && !(all >> (l + 1) & 1U))
        relax({kept & ~bit, all, gradient}, 0.0);
    }
    const int l = gradient;
    const Stage& stage = problem.stage(l);
    if ((all >> l & 1U) && available(l - 1) && used + problem.output(l - 1) + stage.backward_overhead <= problem.memory)
      relax({kept, all & ~(1U << l), l - 1}, stage.backward_time);
  }
  return infinite_time;
}

double sequence_time(const Problem& problem, const std::vector<Action>& actions)
{
  double total = 0;
  for (const Action& action : actions)
    total += action.kind == ActionKind::backward ? problem.stage(action.layer).backward_time
                                                 : problem.stage(action.layer).forward_time;
  return total;
}

TEST(ChainRotor, MatchesExhaustiveSearchOnSmallChains)
{
  std::mt19937 random(12345);
  int feasible = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int length = 1 + trial % 6;
    const Problem problem = random_problem(random, length, 4 + trial % 13);
    const RotorTable table(problem);
    const double dp = table.cost(1, length, problem.memory);
    const double best = exhaustive_remat(problem);
    ASSERT_NEAR(dp == infinite_time ? -1 : dp, best == infinite_time ? -1 : best, 1e-9) << "trial " << trial;
    if (dp == infinite_time)
      continue;
    ++feasible;
    const auto actions = table.sequence(1, length, problem.memory);
    EXPECT_NEAR(sequence_time(problem, actions), dp, 1e-9);
    const int peak = remat_peak(problem, actions, 1, length);
    EXPECT_GE(peak, 0) << "trial " << trial;
    EXPECT_LE(peak, problem.memory) << "trial " << trial;
  }
  EXPECT_GT(feasible, 100);
}

TEST(ChainRotor, KnownSmallCase)
{
  // Two layers, a = 1, abar = 2, u_F = 1, u_B = 2. Keeping everything peaks at B_2: delta_2 + abar_1 + abar_2 +
  // delta_1 = 6. With 5 units layer 1 runs F_ck and is recomputed F_all before B_1 (one more forward: 7); B_2 alone
  // needs a_1 + abar_2 + delta_2 + delta_1 = 5, so 4 units do not fit.
  Problem problem;
  problem.stages = {Stage{1.0, 2.0, 1, 2, 0, 0}, Stage{1.0, 2.0, 1, 2, 0, 0}};
  problem.memory = 6;
  const RotorTable table(problem);
  EXPECT_DOUBLE_EQ(table.cost(1, 2, 6), 6.0);
  EXPECT_DOUBLE_EQ(table.cost(1, 2, 5), 7.0);
  EXPECT_EQ(table.cost(1, 2, 4), infinite_time);
  const std::vector<Action> expected{{ActionKind::forward_checkpoint, 1},
                                     {ActionKind::forward_all, 2},
                                     {ActionKind::backward, 2},
                                     {ActionKind::forward_all, 1},
                                     {ActionKind::backward, 1}};
  EXPECT_EQ(table.sequence(1, 2, 5), expected);
  problem.memory = 5;
  EXPECT_EQ(exhaustive_remat(problem), 7.0);
}

// Every block schedule of the model (all decompositions, kinds and offload choices), evaluated by simulation.
double exhaustive_blocks(const Problem& problem, const RotorTable& rotor, bool segments, bool offloads,
                         std::vector<Block>* best_blocks = nullptr)
{
  const int length = problem.length();
  double best = infinite_time;
  std::vector<Block> blocks;
  std::function<void(int)> grow = [&](int boundary) {
    if (boundary == length) {
      const int count = static_cast<int>(blocks.size());
      const int choices = offloads && count >= 3 ? 1 << (count - 2) : 1;
      for (int mask = 0; mask < choices; ++mask) {
        for (int b = 0; b < count; ++b)
          blocks[static_cast<std::size_t>(b)].offload_item = b < count - 2 && (mask >> b & 1);
        const double time = evaluate_blocks(problem, rotor, blocks);
        if (time < best - 1e-12) {
          best = time;
          if (best_blocks)
            *best_blocks = blocks;
        }
      }
      return;
    }
    if (segments || boundary == length - 1) {
      blocks.push_back({BlockKind::final, boundary + 1, length, false, -1});
      grow(length);
      blocks.pop_back();
    }
    if (boundary + 1 < length) {
      blocks.push_back({BlockKind::keep_all, boundary + 1, boundary + 1, false, -1});
      grow(boundary + 1);
      blocks.pop_back();
    }
    if (segments)
      for (int j = boundary + 1; j < length; ++j) {
        blocks.push_back({BlockKind::segment, boundary + 1, j, false, -1});
        grow(j);
        blocks.pop_back();
      }
  };
  grow(0);
  return best;
}

TEST(ChainPofo, MatchesExhaustiveSearchOnSmallChains)
{
  std::mt19937 random(777);
  int with_offload_gain = 0;
  int feasible = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int length = 1 + trial % 6;
    const Problem problem = random_problem(random, length, 5 + trial % 11);
    const RotorTable rotor(problem);
    const BlockSchedule pofo = solve_combined(problem, rotor, {CombinedMode::full});
    const double best = exhaustive_blocks(problem, rotor, true, true);
    ASSERT_NEAR(pofo.time == infinite_time ? -1 : pofo.time, best == infinite_time ? -1 : best, 1e-9)
        << "trial " << trial;
    const BlockSchedule offload = solve_combined(problem, rotor, {CombinedMode::offload_only});
    const double best_offload = exhaustive_blocks(problem, rotor, false, true);
    ASSERT_NEAR(offload.time == infinite_time ? -1 : offload.time, best_offload == infinite_time ? -1 : best_offload,
                1e-9)
        << "trial " << trial;
    if (pofo.time == infinite_time)
      continue;
    ++feasible;
    std::string why;
    EXPECT_NEAR(evaluate_blocks(problem, rotor, pofo.blocks, &why), pofo.time, 1e-9) << why;
    const double rotor_time = rotor.cost(1, length, problem.memory);
    EXPECT_LE(pofo.time, rotor_time + 1e-12);
    EXPECT_LE(pofo.time, offload.time + 1e-12);
    if (pofo.time < rotor_time - 1e-9)
      ++with_offload_gain;
    const BlockSchedule capped = solve_combined(problem, rotor, {CombinedMode::hidden_offloads});
    const BlockSchedule opportunist = solve_opportunist(problem, rotor);
    EXPECT_LE(pofo.time, capped.time + 1e-12);
    EXPECT_LE(capped.time, rotor_time + 1e-12); // rotor is one of autocapper's schedules
    EXPECT_LE(pofo.time, opportunist.time + 1e-12);
    if (capped.time != infinite_time) {
      EXPECT_NEAR(evaluate_blocks(problem, rotor, capped.blocks), capped.time, 1e-9);
    }
  }
  EXPECT_GT(feasible, 100);
  EXPECT_GT(with_offload_gain, 10); // offloading matters on some of these cases
}

TEST(ChainPofo, OffloadHidesBehindCompute)
{
  // Four layers (a = abar = 2 units), 11 units: keeping everything needs 12 at B_4. Offloading abar_1 during F_2
  // (0.5 s under 1 s) and prefetching it during B_3 costs nothing, so pofo reaches 4 * (1 + 1) = 8; rotor recomputes
  // two forwards (10).
  Problem problem;
  for (int l = 0; l < 4; ++l)
    problem.stages.push_back(Stage{1, 1, 2, 2, 0, 0});
  problem.unit_transfer_time = 0.25;
  problem.memory = 11;
  const RotorTable rotor(problem);
  const BlockSchedule pofo = solve_combined(problem, rotor);
  EXPECT_DOUBLE_EQ(rotor.cost(1, 4, 11), 10.0);
  EXPECT_DOUBLE_EQ(pofo.time, 8.0);
  ASSERT_FALSE(pofo.blocks.empty());
  EXPECT_TRUE(pofo.blocks[0].offload_item);
  EXPECT_DOUBLE_EQ(exhaustive_blocks(problem, rotor, true, true), 8.0);
  problem.memory = 12;
  EXPECT_DOUBLE_EQ(RotorTable(problem).cost(1, 4, 12), 8.0);
}

} // namespace
} // namespace memsim::chain
