// The partitioner's conservative cost model and its exact minimizer: a shortest path over blocks, where the cost of
// block r depends on the block q before it (O(n L^2) (q, r) pairs); the greedy fallback; the public entry points.
#include "dp_cost.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace memsim::dynn {
namespace {

// mig(q, r) of the cost model, straight from the definition. q = [q_begin, r_begin); no q when q_begin == r_begin.
cost::Transfers transfers_of(const BlockIndex& index, std::size_t q_begin, std::size_t r_begin, std::size_t r_end)
{
  const BlockProblem& problem = index.problem();
  cost::Transfers transfers;
  std::vector<std::uint8_t> seen(problem.bytes.size(), 0);
  cost::add_prefetches(index, q_begin, r_begin, r_end, seen, transfers);
  for (std::size_t i = q_begin; i < r_begin; ++i)
    for (std::uint32_t t : problem.ops[i].tensors) {
      if (seen[t] != 0)
        continue;
      seen[t] = 1; // in W_q, not in W_r
      if (index.used_from(t, r_end) && index.first_write(t) < r_begin) {
        transfers.write_back_bytes += problem.bytes[t];
        ++transfers.count;
      }
    }
  return transfers;
}

struct State {
  cost::Times times;
  std::size_t blocks = 0;
  std::size_t previous_begin = 0; // the block before starts here (== this block's begin: none)
  bool reached = false;
};

bool improves(const cost::Times& times, std::size_t blocks, const State& incumbent)
{
  return !incumbent.reached || detail::better(times.finish_s, blocks, incumbent.times.finish_s, incumbent.blocks);
}

} // namespace

namespace detail {

void require_each_op_fits(const BlockIndex& index)
{
  for (std::size_t i = 0; i < index.op_count(); ++i)
    if (index.longest_end(i) == i)
      throw Infeasible(fmt::format("dynn-block: op {} alone needs {} bytes, more than one buffer ({} bytes, half the "
                                   "budget)",
                                   i, index.block_bytes(i, i + 1), index.problem().capacity));
}

Partition greedy_blocks(const BlockIndex& index)
{
  Partition partition;
  for (std::size_t begin = 0; begin < index.op_count(); begin = index.longest_end(begin))
    partition.push_back(index.longest_end(begin));
  return partition;
}

bool better(double finish, std::size_t blocks, double incumbent_finish, std::size_t incumbent_blocks)
{
  const double tolerance = 1e-12 * std::max(1.0, std::abs(incumbent_finish));
  if (finish < incumbent_finish - tolerance)
    return true;
  return finish <= incumbent_finish + tolerance && blocks < incumbent_blocks;
}

double conservative_cost(const BlockIndex& index, const Partition& partition)
{
  const BlockProblem& problem = index.problem();
  cost::Times times;
  std::size_t q_begin = 0;
  std::size_t r_begin = 0;
  for (std::size_t r_end : partition) {
    const double migration = cost::migration_s(problem, transfers_of(index, q_begin, r_begin, r_end));
    times = cost::next_block(times, migration, index.compute_s(r_begin, r_end));
    q_begin = r_begin;
    r_begin = r_end;
  }
  return times.finish_s;
}

DpResult conservative_dp(const BlockIndex& index, double work_limit)
{
  const BlockProblem& problem = index.problem();
  const std::size_t n = index.op_count();
  DpResult result;
  if (n == 0)
    return result;
  require_each_op_fits(index);
  const double longest = static_cast<double>(index.longest_block());
  if (static_cast<double>(n) * longest * longest > work_limit) {
    result.partition = greedy_blocks(index);
    result.greedy = true;
    result.cost_s = conservative_cost(index, result.partition);
    return result;
  }

  // states[a][e - a - 1]: the best partition of ops [0, e) whose last block is [a, e).
  std::vector<std::vector<State>> states(n);
  for (std::size_t a = 0; a < n; ++a)
    states[a].resize(index.longest_end(a) - a);
  const std::size_t tensors = problem.bytes.size();
  std::vector<std::size_t> stamp(tensors, n + 1);
  const std::size_t window = index.longest_block(); // q starts at most this far before r
  // Per offset d = r_begin - q_begin in [1, window]: transfers that count only for q starting at or before it.
  std::vector<std::uint64_t> prefetch_bytes(window + 2), prefetch_count(window + 2);
  std::vector<std::uint64_t> evict_bytes(window + 2), evict_count(window + 2);
  struct Leaving {
    std::uint32_t tensor;
    std::size_t offset; // r_begin minus its last access before r
    std::size_t next;   // its first access at or after r_begin
  };
  std::vector<Leaving> leaving;

  for (std::size_t a = 0; a < n; ++a) {
    // Tensors accessed before `a` in the window, by their last access (walking down): candidates for W_q \ W_r.
    leaving.clear();
    for (std::size_t d = 1; d <= window && d <= a; ++d)
      for (std::uint32_t t : problem.ops[a - d].tensors)
        if (stamp[t] != a) {
          stamp[t] = a;
          if (index.first_write(t) < a)
            leaving.push_back({t, d, index.next_access(t, a)});
        }
    std::fill(prefetch_bytes.begin(), prefetch_bytes.end(), 0);
    std::fill(prefetch_count.begin(), prefetch_count.end(), 0);
    std::uint64_t prefetch_total_bytes = 0;
    std::uint64_t prefetch_total_count = 0;
    std::vector<std::uint8_t> in_block(tensors, 0);
    for (std::size_t e = a + 1; e <= index.longest_end(a); ++e) {
      // Grow W_r by op e - 1.
      for (std::uint32_t t : problem.ops[e - 1].tensors) {
        if (in_block[t] != 0)
          continue;
        in_block[t] = 1;
        if (index.produced(t) && index.producer(t) >= a)
          continue; // Prod_r: allocated in place
        prefetch_total_bytes += problem.bytes[t];
        ++prefetch_total_count;
        const std::ptrdiff_t previous = index.previous_access(t, a);
        if (previous >= 0 && a - static_cast<std::size_t>(previous) <= window) {
          const std::size_t d = a - static_cast<std::size_t>(previous);
          prefetch_bytes[d] += problem.bytes[t];
          ++prefetch_count[d];
        }
      }
      std::fill(evict_bytes.begin(), evict_bytes.end(), 0);
      std::fill(evict_count.begin(), evict_count.end(), 0);
      for (const Leaving& candidate : leaving)
        if (candidate.next >= e && (candidate.next < n || problem.needed_after[candidate.tensor] != 0)) {
          evict_bytes[candidate.offset] += problem.bytes[candidate.tensor];
          ++evict_count[candidate.offset];
        }

      State& target = states[a][e - a - 1];
      const double compute = index.compute_s(a, e);
      if (a == 0) {
        cost::Transfers first{0, prefetch_total_bytes, prefetch_total_count};
        target.times = cost::next_block({}, cost::migration_s(problem, first), compute);
        target.blocks = 1;
        target.previous_begin = 0;
        target.reached = true;
        continue;
      }
      // q = [a - d, a): W_q holds the tensors last accessed at offset <= d, so they are not prefetched.
      cost::Transfers transfers{0, prefetch_total_bytes, prefetch_total_count};
      for (std::size_t d = 1; d <= window && d <= a; ++d) {
        transfers.prefetch_bytes -= prefetch_bytes[d];
        transfers.count -= prefetch_count[d];
        transfers.write_back_bytes += evict_bytes[d];
        transfers.count += evict_count[d];
        const std::size_t q = a - d;
        if (index.longest_end(q) < a)
          continue;
        const State& source = states[q][d - 1];
        if (!source.reached)
          continue;
        const cost::Times times = cost::next_block(source.times, cost::migration_s(problem, transfers), compute);
        if (improves(times, source.blocks + 1, target)) {
          target.times = times;
          target.blocks = source.blocks + 1;
          target.previous_begin = q;
          target.reached = true;
        }
      }
    }
  }

  // The best last block, then back through the predecessors.
  State best;
  std::size_t best_begin = 0;
  for (std::size_t a = 0; a < n; ++a)
    if (index.longest_end(a) == n) {
      const State& state = states[a][n - a - 1];
      if (state.reached && improves(state.times, state.blocks, best)) {
        best = state;
        best_begin = a;
      }
    }
  std::vector<std::size_t> ends{n};
  std::size_t begin = best_begin;
  std::size_t end = n;
  while (begin > 0) {
    const std::size_t previous = states[begin][end - begin - 1].previous_begin;
    ends.push_back(begin);
    end = begin;
    begin = previous;
  }
  result.partition.assign(ends.rbegin(), ends.rend());
  result.cost_s = best.times.finish_s;
  return result;
}

} // namespace detail

double dp_cost(const BlockIndex& index, const Partition& partition, DpSets sets)
{
  return sets == DpSets::exact ? detail::exact_cost(index, partition) : detail::conservative_cost(index, partition);
}

DpResult partition_dp(const BlockIndex& index, double work_limit, DpSets sets)
{
  return sets == DpSets::exact ? detail::exact_dp(index, work_limit) : detail::conservative_dp(index, work_limit);
}

} // namespace memsim::dynn
