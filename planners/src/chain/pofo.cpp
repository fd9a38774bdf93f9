// pofo: optimal combination of rematerialization and offloading on a chain (Beaumont, Eyraud-Dubois, Shilova,
// NeurIPS 2021, §4 and appendix B), in the block model of chain.hpp. The paper's state (i, A_i, Delta_F, Delta_B, x)
// becomes here (i, K, x, Delta):
//   i      the boundary: layers 1..i have run their top-level forward, the item of the last block sits at i;
//   K      persistent memory (A_i): items of earlier blocks kept on the GPU until their backward;
//   x      the kind of the last block (the paper's x: abar_i kept (F_all) or a checkpoint a_i);
//   Delta  the size of the offloaded item whose prefetch overlaps the next block's backward (Delta_B).
// Delta_F is not a state here: an offload must end with the next block's forward, so it never spans two blocks.
// Idle times follow the paper's Lemma 1: a transfer of duration d overlapped with compute of duration u leaves the
// compute stream idle for max(0, d - u). The backward of a segment is rotor's opt(s, t, m) (Theorem 1's L^3 N term);
// the block DP is O(L^2 N^2): each of the L N^2 states tries O(L) next blocks.
// offload-dp (Euro-Par 2020) is the same DP restricted to F_all blocks (no recomputation), and autocapper the same DP
// with offloads allowed only when fully overlapped; opportunist is a greedy prefix rule (§5.1).
#include "memsim/common/error.hpp"
#include "memsim/planners/chain.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace memsim::chain {
namespace {

int item_size(const Problem& problem, int boundary, bool keep_all)
{
  if (boundary == 0)
    return 0;
  return keep_all ? problem.stage(boundary).saved : problem.stage(boundary).output;
}

struct Choice {
  std::int32_t next_boundary = -1; // -1: infeasible
  std::int8_t kind = 0;            // BlockKind
  std::int8_t offload = 0;
};

} // namespace

BlockSchedule solve_combined(const Problem& problem, const RotorTable& rotor, CombinedOptions options)
{
  BlockSchedule result;
  const int length = problem.length();
  const int memory = problem.memory;
  if (length == 0) {
    result.time = 0;
    return result;
  }
  const auto levels = static_cast<std::size_t>(memory + 1);
  // G[i][x][K][Delta], flattened.
  auto at = [&](int boundary, int keep_all, int kept, int delta) {
    return ((static_cast<std::size_t>(boundary) * 2 + static_cast<std::size_t>(keep_all)) * levels +
            static_cast<std::size_t>(kept)) *
               levels +
           static_cast<std::size_t>(delta);
  };
  std::vector<double> best(static_cast<std::size_t>(length + 1) * 2 * levels * levels, infinite_time);
  std::vector<Choice> choice(best.size());
  const double unit = problem.unit_transfer_time;
  const bool allow_segments = options.mode != CombinedMode::offload_only;
  const bool hidden_only = options.mode == CombinedMode::hidden_offloads;
  std::vector<double> forward_prefix(static_cast<std::size_t>(length) + 1, 0.0);
  for (int l = 1; l <= length; ++l)
    forward_prefix[static_cast<std::size_t>(l)] =
        forward_prefix[static_cast<std::size_t>(l - 1)] + problem.stage(l).forward_time;

  for (int i = length - 1; i >= 0; --i) {
    for (int keep_all = 0; keep_all <= (i > 0 ? 1 : 0); ++keep_all) {
      const int item = item_size(problem, i, keep_all != 0);
      const int extra = item - problem.output(i); // the part of the item rotor does not count
      for (int kept = 0; kept + item <= memory; ++kept) {
        for (int delta = 0; kept + item + delta <= memory; ++delta) {
          if (i == 0 && (kept != 0 || delta != 0))
            continue;
          double best_time = infinite_time;
          Choice best_choice;
          auto consider = [&](double time, int next, BlockKind kind, bool offload) {
            if (time < best_time) {
              best_time = time;
              best_choice = {next, static_cast<std::int8_t>(kind), static_cast<std::int8_t>(offload)};
            }
          };
          // Delta is only known by its size: bound its prefetch from above (see Problem::transfer_slack).
          const double prefetch_time = delta > 0 ? delta * unit + problem.transfer_slack : 0.0;
          const double offload_time = i > 0 ? problem.item_transfer_time(i, keep_all != 0) : 0.0;
          // The final block [i+1..L]: the offloaded item of Delta is prefetched after it.
          if ((allow_segments || i == length - 1) && !(hidden_only && delta > 0))
            consider(rotor.cost(i + 1, length, memory - kept - extra) + prefetch_time, length, BlockKind::final, false);
          const bool can_offload = item > 0;
          // A single layer l = i+1 run F_all, its abar kept (or offloaded) until B_l.
          if (i + 1 < length) {
            const int l = i + 1;
            const Stage& stage = problem.stage(l);
            const bool forward_fits = kept + item + stage.saved + stage.forward_overhead <= memory;
            const bool backward_fits =
                kept + delta + item + stage.saved + stage.output + problem.output(i) + stage.backward_overhead <=
                memory;
            if (forward_fits && backward_fits) {
              const double idle_backward = delta > 0 ? std::max(0.0, prefetch_time - stage.backward_time) : 0.0;
              for (int offload = 0; offload <= (can_offload ? 1 : 0); ++offload) {
                const double idle_forward = offload ? std::max(0.0, offload_time - stage.forward_time) : 0.0;
                if (hidden_only && (idle_forward > 0 || idle_backward > 0))
                  continue;
                const int next_kept = kept + (offload ? 0 : item);
                const int next_delta = offload ? item : 0;
                if (next_kept + stage.saved + next_delta > memory)
                  continue;
                const double rest = best[at(l, 1, next_kept, next_delta)];
                consider(stage.forward_time + stage.backward_time + idle_forward + idle_backward + rest, l,
                         BlockKind::keep_all, offload != 0);
              }
            }
          }
          // A segment [i+1..j]: forward dropping all but a_j, backward by rotor with what memory is left.
          if (allow_segments) {
            const int backward_memory = memory - kept - delta - extra;
            int forward_peak = 0;
            for (int j = i + 1; j < length; ++j) {
              const Stage& stage = problem.stage(j);
              forward_peak = std::max(forward_peak,
                                      (j > i + 1 ? problem.output(j - 1) : 0) + stage.saved + stage.forward_overhead);
              if (kept + item + forward_peak > memory)
                break; // the peak only grows with j
              const double backward = rotor.cost(i + 1, j, backward_memory);
              if (backward == infinite_time)
                continue;
              const double forward =
                  forward_prefix[static_cast<std::size_t>(j)] - forward_prefix[static_cast<std::size_t>(i)];
              const double idle_backward = delta > 0 ? std::max(0.0, prefetch_time - backward) : 0.0;
              for (int offload = 0; offload <= (can_offload ? 1 : 0); ++offload) {
                const double idle_forward = offload ? std::max(0.0, offload_time - forward) : 0.0;
                if (hidden_only && (idle_forward > 0 || idle_backward > 0))
                  continue;
                const int next_kept = kept + (offload ? 0 : item);
                const int next_delta = offload ? item : 0;
                if (next_kept + stage.output + next_delta > memory)
                  continue;
                const double rest = best[at(j, 0, next_kept, next_delta)];
                consider(forward + backward + idle_forward + idle_backward + rest, j, BlockKind::segment, offload != 0);
              }
            }
          }
          best[at(i, keep_all, kept, delta)] = best_time;
          choice[at(i, keep_all, kept, delta)] = best_choice;
        }
      }
    }
  }

  result.time = best[at(0, 0, 0, 0)];
  if (result.time == infinite_time)
    return result;
  int i = 0, keep_all = 0, kept = 0, delta = 0;
  while (true) {
    const Choice c = choice[at(i, keep_all, kept, delta)];
    const int item = item_size(problem, i, keep_all != 0);
    Block block;
    block.kind = static_cast<BlockKind>(c.kind);
    block.first = i + 1;
    block.last = c.next_boundary;
    block.offload_item = false;
    if (!result.blocks.empty())
      result.blocks.back().offload_item = c.offload != 0;
    if (block.kind == BlockKind::final) {
      block.backward_memory = memory - kept - (item - problem.output(i));
      result.blocks.push_back(block);
      break;
    }
    if (block.kind == BlockKind::segment)
      block.backward_memory = memory - kept - delta - (item - problem.output(i));
    result.blocks.push_back(block);
    kept += c.offload ? 0 : item;
    delta = c.offload ? item : 0;
    i = c.next_boundary;
    keep_all = block.kind == BlockKind::keep_all ? 1 : 0;
  }
  return result;
}

BlockSchedule solve_opportunist(const Problem& problem, const RotorTable& rotor)
{
  // Offload the abar of layers 1..p-1 (kept F_all, transfers overlapped with the next layer's forward), keep abar_p
  // (the final block's input), and let rotor handle p+1..L with what memory is left. Try every p, keep the best.
  BlockSchedule best;
  const int length = problem.length();
  for (int prefix = 0; prefix < length; ++prefix) {
    std::vector<Block> blocks;
    for (int l = 1; l <= prefix; ++l)
      blocks.push_back({BlockKind::keep_all, l, l, l < prefix, 0});
    // Memory left for the final block: whatever evaluate_blocks allows; find the largest by scanning down.
    Block final_block{BlockKind::final, prefix + 1, length, false, 0};
    blocks.push_back(final_block);
    int kept = 0;
    if (prefix > 0)
      kept = problem.stage(prefix).saved - problem.stage(prefix).output;
    blocks.back().backward_memory = problem.memory - kept;
    if (blocks.back().backward_memory < 0)
      continue;
    const double time = evaluate_blocks(problem, rotor, blocks);
    if (time < best.time) {
      best.time = time;
      best.blocks = blocks;
    }
  }
  return best;
}

double evaluate_blocks(const Problem& problem, const RotorTable& rotor, const std::vector<Block>& blocks,
                       std::string* why)
{
  auto fail = [&](const std::string& reason) {
    if (why)
      *why = reason;
    return infinite_time;
  };
  const int count = static_cast<int>(blocks.size());
  const int length = problem.length();
  const int memory = problem.memory;
  if (count == 0 || blocks.back().kind != BlockKind::final || blocks.back().last != length)
    return fail("the last block must be the final block ending at L");
  int expected = 1;
  for (int b = 0; b < count; ++b) {
    const Block& block = blocks[static_cast<std::size_t>(b)];
    if (block.first != expected || block.last < block.first || block.last > length)
      return fail(fmt::format("block {} does not continue the chain", b));
    if (block.kind == BlockKind::keep_all && block.first != block.last)
      return fail(fmt::format("block {}: an F_all block has one layer", b));
    if (block.kind != BlockKind::final && block.last == length)
      return fail(fmt::format("block {}: only the final block reaches L", b));
    if (block.kind == BlockKind::final && b != count - 1)
      return fail("a final block before the end");
    if (block.offload_item && b >= count - 2)
      return fail(fmt::format("block {}: the item of the final block or of its input cannot be offloaded", b));
    expected = block.last + 1;
  }
  auto item = [&](int b) {
    const Block& block = blocks[static_cast<std::size_t>(b)];
    return block.kind == BlockKind::keep_all ? problem.stage(block.last).saved : problem.stage(block.last).output;
  };
  auto offloaded = [&](int b) { return b >= 0 && blocks[static_cast<std::size_t>(b)].offload_item; };
  auto transfer_time = [&](int b) {
    const Block& block = blocks[static_cast<std::size_t>(b)];
    return problem.item_transfer_time(block.last, block.kind == BlockKind::keep_all);
  };
  const int final_index = count - 1;

  // Forward phase: compute stream plus the d2h stream.
  double now = 0;
  double d2h_free = 0;
  std::vector<double> forward_end(static_cast<std::size_t>(count), 0.0);
  for (int b = 0; b < final_index; ++b) {
    const Block& block = blocks[static_cast<std::size_t>(b)];
    int present = 0; // items of earlier blocks on the GPU during this forward
    for (int e = 0; e < b; ++e)
      if (!offloaded(e) || e == b - 1)
        present += item(e);
    double duration = 0;
    for (int l = block.first; l <= block.last; ++l) {
      const Stage& stage = problem.stage(l);
      duration += stage.forward_time;
      const int live = (block.kind == BlockKind::segment && l > block.first ? problem.output(l - 1) : 0) + stage.saved;
      if (present + live + stage.forward_overhead > memory)
        return fail(fmt::format("forward of layer {} needs {} units", l, present + live + stage.forward_overhead));
    }
    now += duration;
    forward_end[static_cast<std::size_t>(b)] = now;
    if (offloaded(b - 1)) { // the previous item's copy overlapped this forward: wait for it
      const double start = std::max(forward_end[static_cast<std::size_t>(b - 1)], d2h_free);
      d2h_free = start + transfer_time(b - 1);
      now = std::max(now, d2h_free);
    }
  }
  // The final block: rotor with what the persistent items leave.
  {
    const Block& block = blocks[static_cast<std::size_t>(final_index)];
    int present = 0;
    for (int e = 0; e < final_index; ++e)
      if (!offloaded(e))
        present += item(e);
    const int input_counted = problem.output(block.first - 1);
    const int allowed = memory - (present - input_counted);
    const int asked = block.backward_memory < 0 ? allowed : block.backward_memory;
    if (asked > allowed)
      return fail(fmt::format("the final block asks {} units, {} are left", asked, allowed));
    const double cost = rotor.cost(block.first, block.last, asked);
    if (cost == infinite_time)
      return fail("the final block does not fit");
    now += cost;
  }
  const double final_end = now;
  // Backward phase: compute stream plus the h2d stream.
  double h2d_free = 0;
  std::vector<double> backward_start(static_cast<std::size_t>(count), final_end);
  for (int c = final_index - 1; c >= 0; --c) {
    const Block& block = blocks[static_cast<std::size_t>(c)];
    if (offloaded(c - 1)) { // item(c-1) must be back before bwd(c); its prefetch began with bwd(c+1)
      const double begin = c + 1 < final_index ? backward_start[static_cast<std::size_t>(c + 1)] : final_end;
      const double start = std::max(begin, h2d_free);
      h2d_free = start + transfer_time(c - 1);
      now = std::max(now, h2d_free);
    }
    backward_start[static_cast<std::size_t>(c)] = now;
    int present = 0; // earlier items on the GPU during bwd(c)
    for (int e = 0; e < c; ++e)
      if (!offloaded(e) || e == c - 1 || (e == c - 2 && c + 1 <= final_index))
        present += item(e);
    if (block.kind == BlockKind::keep_all) {
      const int l = block.first;
      const Stage& stage = problem.stage(l);
      if (present + stage.saved + stage.output + problem.output(l - 1) + stage.backward_overhead > memory)
        return fail(fmt::format("backward of layer {} does not fit", l));
      now += stage.backward_time;
    } else {
      const int allowed = memory - (present - problem.output(block.first - 1));
      const int asked = block.backward_memory < 0 ? allowed : block.backward_memory;
      if (asked > allowed)
        return fail(fmt::format("block {} asks {} units for its backward, {} are left", c, asked, allowed));
      const double cost = rotor.cost(block.first, block.last, asked);
      if (cost == infinite_time)
        return fail(fmt::format("block {} backward does not fit", c));
      now += cost;
    }
  }
  // The forward phase time of non-final blocks was counted in `now` before the final block.
  return now;
}

ExpandedSchedule expand_blocks(const RotorTable& rotor, const std::vector<Block>& blocks)
{
  ExpandedSchedule expanded;
  auto& actions = expanded.actions;
  const int count = static_cast<int>(blocks.size());
  const int final_index = count - 1;
  std::vector<int> forward_last(static_cast<std::size_t>(count), -1);
  std::vector<int> backward_first(static_cast<std::size_t>(count), -1);
  for (int b = 0; b < final_index; ++b) {
    const Block& block = blocks[static_cast<std::size_t>(b)];
    if (block.kind == BlockKind::keep_all) {
      actions.push_back({ActionKind::forward_all, block.first});
    } else {
      actions.push_back({ActionKind::forward_checkpoint, block.first});
      for (int l = block.first + 1; l <= block.last; ++l)
        actions.push_back({ActionKind::forward_none, l});
    }
    forward_last[static_cast<std::size_t>(b)] = static_cast<int>(actions.size()) - 1;
  }
  const Block& final_block = blocks[static_cast<std::size_t>(final_index)];
  const int final_first = static_cast<int>(actions.size());
  for (const Action& action : rotor.sequence(final_block.first, final_block.last, final_block.backward_memory))
    actions.push_back(action);
  backward_first[static_cast<std::size_t>(final_index)] = final_first;
  const int final_last = static_cast<int>(actions.size()) - 1;
  for (int c = final_index - 1; c >= 0; --c) {
    const Block& block = blocks[static_cast<std::size_t>(c)];
    backward_first[static_cast<std::size_t>(c)] = static_cast<int>(actions.size());
    if (block.kind == BlockKind::keep_all) {
      actions.push_back({ActionKind::backward, block.first});
    } else {
      for (const Action& action : rotor.sequence(block.first, block.last, block.backward_memory))
        actions.push_back(action);
    }
  }
  for (int b = 0; b < final_index; ++b) {
    if (!blocks[static_cast<std::size_t>(b)].offload_item)
      continue;
    Transfer offload;
    offload.block = b;
    offload.offload = true;
    offload.start_after = forward_last[static_cast<std::size_t>(b)];
    offload.needed_before = forward_last[static_cast<std::size_t>(b + 1)] + 1;
    expanded.transfers.push_back(offload);
    Transfer prefetch;
    prefetch.block = b;
    prefetch.offload = false;
    prefetch.start_after = b + 2 < final_index ? backward_first[static_cast<std::size_t>(b + 2)] - 1 : final_last;
    prefetch.needed_before = backward_first[static_cast<std::size_t>(b + 1)];
    expanded.transfers.push_back(prefetch);
  }
  return expanded;
}

} // namespace memsim::chain
