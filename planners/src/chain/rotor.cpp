// rotor: the optimal rematerialization-only DP for heterogeneous chains (Beaumont, Herrmann, Pallez, Shilova 2019,
// "Optimal checkpointing for heterogeneous chains: how to train deep neural networks with limited memory", §4:
// the dynamic program over (s, t, m) under memory persistency). Implemented from the recurrence, in our memory model
// (see chain.hpp):
//   opt(s, s, m) = u_F(s) + u_B(s)                      if m >= max(need_all(s, s), need_backward(s))
//   opt(s, t, m) = min( u_F(s) + opt(s+1, t, m - a_{s-1} - abar_s + a_s) + u_B(s)          [F_all s]
//                       min_{s<j<=t} sum_{k=s}^{j-1} u_F(k) + opt(j, t, m - a_{s-1}) + opt(s, j-1, m) )
//                                                                          [F_ck s, F_none s+1..j-1: checkpoint
//                                                                          a_{j-1}]
// with the memory of each forward in the second case checked against m. O(L^3 N) time, O(L^2 N) memory; the
// innermost loop runs over m and is a plain minimum (the argmin is recomputed when a sequence is asked for), so it
// vectorizes.
#include "memsim/common/error.hpp"
#include "memsim/planners/chain.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace memsim::chain {

std::size_t RotorTable::index(int first, int last) const
{
  const auto length = static_cast<std::size_t>(problem_->length());
  const auto s = static_cast<std::size_t>(first);
  return (s - 1) * (length + 1) - (s - 1) * s / 2 + static_cast<std::size_t>(last - first);
}

int RotorTable::all_start(int first, int last) const
{
  const Stage& stage = problem_->stage(first);
  const int a_before = problem_->output(first - 1);
  const int need_all = a_before + problem_->output(last) + stage.saved + stage.forward_overhead;
  const int need_backward = 2 * a_before + stage.saved + stage.output + stage.backward_overhead;
  return std::max(need_all, need_backward);
}

int RotorTable::kept_outside(int first) const
{
  const Stage& stage = problem_->stage(first);
  return problem_->output(first - 1) + stage.saved - stage.output;
}

int RotorTable::forward_need(int first, int last, int layer) const
{
  const Stage& forward = problem_->stage(layer);
  return problem_->output(first - 1) + problem_->output(last) + (layer > first ? problem_->output(layer - 1) : 0) +
         forward.saved + forward.forward_overhead;
}

double RotorTable::segment_forward_time(int first, int layer) const
{
  return forward_prefix_[static_cast<std::size_t>(layer)] - forward_prefix_[static_cast<std::size_t>(first - 1)];
}

RotorTable::RotorTable(const Problem& problem) : problem_(&problem), levels_(problem.memory + 1)
{
  const int length = problem.length();
  const std::size_t pairs = static_cast<std::size_t>(length) * static_cast<std::size_t>(length + 1) / 2;
  const auto levels = static_cast<std::size_t>(levels_);
  cost_.assign(pairs * levels, infinite_time);
  cost_by_last_.assign(pairs * levels, infinite_time);
  auto by_last = [&](int s, int t) {
    return &cost_by_last_[(static_cast<std::size_t>(t - 1) * static_cast<std::size_t>(t) / 2 +
                           static_cast<std::size_t>(s - 1)) *
                          levels];
  };
  forward_prefix_.assign(static_cast<std::size_t>(length) + 1, 0.0);
  for (int l = 1; l <= length; ++l)
    forward_prefix_[static_cast<std::size_t>(l)] =
        forward_prefix_[static_cast<std::size_t>(l - 1)] + problem.stage(l).forward_time;

  for (int distance = 0; distance < length; ++distance) {
    for (int s = 1; s + distance <= length; ++s) {
      const int t = s + distance;
      const Stage& first = problem.stage(s);
      double* out_cost = &cost_[index(s, t) * levels];
      // F_all s (for s == t this is the whole base case): its forward, then B_s with delta_{s-1} produced.
      const int start = all_start(s, t);
      const double own = first.forward_time + first.backward_time;
      if (s == t) {
        for (int m = start; m < levels_; ++m)
          out_cost[m] = own;
        std::copy(out_cost, out_cost + levels, by_last(s, t));
        continue;
      }
      const int outside = kept_outside(s);
      const double* rest = &cost_[index(s + 1, t) * levels];
      for (int m = start; m < levels_; ++m) {
        const double candidate = own + rest[m - outside];
        out_cost[m] = candidate < out_cost[m] ? candidate : out_cost[m];
      }
      // Checkpoint a_{j-1}: forward s..j-1 keeping only a_{s-1} (the caller's) and the last output.
      const int shift = problem.output(s - 1);
      int forward_peak = 0;
      for (int j = s + 1; j <= t; ++j) {
        forward_peak = std::max(forward_peak, forward_need(s, t, j - 1));
        const double prefix = segment_forward_time(s, j - 1);
        const double* right = by_last(j, t);
        const double* left = &cost_[index(s, j - 1) * levels];
        for (int m = std::max(forward_peak, shift); m < levels_; ++m) {
          const double candidate = prefix + right[m - shift] + left[m];
          out_cost[m] = candidate < out_cost[m] ? candidate : out_cost[m];
        }
      }
      std::copy(out_cost, out_cost + levels, by_last(s, t));
    }
  }
}

double RotorTable::cost(int first, int last, int memory) const
{
  if (memory < 0 || first > last)
    return first > last ? 0.0 : infinite_time;
  memory = std::min(memory, levels_ - 1);
  return cost_[index(first, last) * static_cast<std::size_t>(levels_) + static_cast<std::size_t>(memory)];
}

int RotorTable::choice(int s, int t, int m) const
{
  // The options in the table's order; the first whose candidate equals the stored minimum is the one the strict
  // "<" of a single pass would have kept (same expressions, so the same bits).
  const double best = cost(s, t, m);
  const Stage& first = problem_->stage(s);
  const double own = first.forward_time + first.backward_time;
  if (m >= all_start(s, t) && (s == t || own + cost(s + 1, t, m - kept_outside(s)) == best))
    return 0;
  const int shift = problem_->output(s - 1);
  int forward_peak = 0;
  for (int j = s + 1; j <= t; ++j) {
    forward_peak = std::max(forward_peak, forward_need(s, t, j - 1));
    if (m >= std::max(forward_peak, shift) &&
        segment_forward_time(s, j - 1) + cost(j, t, m - shift) + cost(s, j - 1, m) == best)
      return j;
  }
  throw Infeasible(fmt::format("rotor: no option reaches the cost of layers {}..{} at {} memory units", s, t, m));
}

std::vector<Action> RotorTable::sequence(int first, int last, int memory) const
{
  if (cost(first, last, memory) == infinite_time)
    throw Infeasible(fmt::format("rotor: layers {}..{} do not fit in {} memory units", first, last, memory));
  std::vector<Action> actions;
  // Explicit stack of (s, t, m) subproblems; a negative s marks "emit B_{-s}" after an F_all.
  struct Frame {
    int first, last, memory;
  };
  std::vector<Frame> stack{{first, last, std::min(memory, levels_ - 1)}};
  while (!stack.empty()) {
    const Frame frame = stack.back();
    stack.pop_back();
    if (frame.first < 0) {
      actions.push_back({ActionKind::backward, -frame.first});
      continue;
    }
    const int s = frame.first;
    const int t = frame.last;
    const int m = frame.memory;
    const int j = choice(s, t, m);
    if (j == 0) {
      actions.push_back({ActionKind::forward_all, s});
      stack.push_back({-s, 0, 0});
      if (s < t) {
        const Stage& stage = problem_->stage(s);
        stack.push_back({s + 1, t, m - problem_->output(s - 1) - stage.saved + stage.output});
      }
      continue;
    }
    actions.push_back({ActionKind::forward_checkpoint, s});
    for (int k = s + 1; k < j; ++k)
      actions.push_back({ActionKind::forward_none, k});
    stack.push_back({s, j - 1, m});                       // runs second
    stack.push_back({j, t, m - problem_->output(s - 1)}); // runs first
  }
  return actions;
}

RotorResult solve_rotor(const Problem& problem)
{
  RotorResult result;
  if (problem.length() == 0) {
    result.time = 0;
    return result;
  }
  RotorTable table(problem);
  result.time = table.cost(1, problem.length(), problem.memory);
  if (result.time != infinite_time)
    result.actions = table.sequence(1, problem.length(), problem.memory);
  return result;
}

int remat_peak(const Problem& problem, const std::vector<Action>& actions, int first, int last)
{
  // a_{first-1} and delta_last are present from the start; checkpoints in `kept`, F_all results in `all`.
  std::vector<bool> kept(static_cast<std::size_t>(last) + 1, false);
  std::vector<bool> all(static_cast<std::size_t>(last) + 1, false);
  auto available = [&](int layer) {
    return layer == first - 1 || kept[static_cast<std::size_t>(layer)] || all[static_cast<std::size_t>(layer)];
  };
  int gradient = last;
  int in_use = problem.output(first - 1) + problem.output(last);
  int peak = in_use;
  for (const Action& action : actions) {
    const int l = action.layer;
    if (l < first || l > last)
      return -1;
    const Stage& stage = problem.stage(l);
    const auto index = static_cast<std::size_t>(l);
    switch (action.kind) {
    case ActionKind::forward_all:
    case ActionKind::forward_checkpoint:
    case ActionKind::forward_none: {
      if (!available(l - 1) || kept[index] || all[index])
        return -1;
      const bool keep_all = action.kind == ActionKind::forward_all;
      const int produced = keep_all ? stage.saved : stage.output;
      peak = std::max(peak, in_use + stage.saved + stage.forward_overhead); // all of abar exists at its end
      in_use += produced;
      (keep_all ? all : kept)[index] = true;
      if (action.kind == ActionKind::forward_none && l - 1 >= first && kept[index - 1]) {
        kept[index - 1] = false;
        in_use -= problem.output(l - 1);
      }
      break;
    }
    case ActionKind::backward:
      if (gradient != l || !all[index] || !available(l - 1))
        return -1;
      peak = std::max(peak, in_use + problem.output(l - 1) + stage.backward_overhead);
      in_use += problem.output(l - 1) - stage.saved - stage.output;
      all[index] = false;
      gradient = l - 1;
      if (l - 1 >= first && kept[index - 1]) { // a checkpoint is dropped once its backward has passed it
        kept[index - 1] = false;
        in_use -= problem.output(l - 1);
      }
      break;
    }
  }
  return gradient == first - 1 ? peak : -1;
}

} // namespace memsim::chain
