// The partitioner's cost with the runtime's migration sets (DpSets::exact): block s's migration depends on the two
// blocks before it (q, r), so the shortest path runs over (previous block, block) pairs with a transition per next
// block: O(n L^3) transitions, each O(1) after per-block prefix sums.
#include "dp_cost.hpp"

#include <cstdint>

namespace memsim::dynn::detail {
namespace {

// Migration of block s = [s_begin, s_end) after q = [q_begin, r_begin) and r = [r_begin, s_begin) (an empty q or r:
// no block there), straight from the definition.
cost::Transfers transfers_of(const BlockIndex& index, std::size_t q_begin, std::size_t r_begin, std::size_t s_begin,
                             std::size_t s_end)
{
  const BlockProblem& problem = index.problem();
  cost::Transfers transfers;
  std::vector<std::uint8_t> seen(problem.bytes.size(), 0);
  cost::add_prefetches(index, q_begin, s_begin, s_end, seen, transfers);
  for (std::size_t i = q_begin; i < r_begin; ++i)
    for (std::uint32_t t : problem.ops[i].tensors) {
      if (seen[t] != 0)
        continue;
      seen[t] = 1;
      if (index.next_access(t, r_begin) >= s_end && index.used_from(t, s_end) && index.first_write(t) < r_begin) {
        transfers.write_back_bytes += problem.bytes[t];
        ++transfers.count;
      }
    }
  return transfers;
}

// 16 bytes: the finish is the start plus the block's compute, and 0 blocks means not reached.
struct State {
  double start_s = 0;
  std::uint32_t blocks = 0;
  std::uint32_t previous_length = 0; // of the block before the pair's first block (0: none)
};

} // namespace

double exact_cost(const BlockIndex& index, const Partition& partition)
{
  const BlockProblem& problem = index.problem();
  cost::Times times;
  std::size_t q_begin = 0;
  std::size_t r_begin = 0;
  std::size_t s_begin = 0;
  for (std::size_t s_end : partition) {
    const double migration = cost::migration_s(problem, transfers_of(index, q_begin, r_begin, s_begin, s_end));
    times = cost::next_block(times, migration, index.compute_s(s_begin, s_end));
    q_begin = r_begin;
    r_begin = s_begin;
    s_begin = s_end;
  }
  return times.finish_s;
}

DpResult exact_dp(const BlockIndex& index, double work_limit)
{
  const BlockProblem& problem = index.problem();
  const std::size_t n = index.op_count();
  DpResult result;
  if (n == 0)
    return result;
  require_each_op_fits(index);
  const std::size_t window = index.longest_block();
  const double longest = static_cast<double>(window);
  // States are n L (L + 1): bound their memory too (160 MB).
  if (static_cast<double>(n) * longest * longest * longest > work_limit ||
      static_cast<double>(n) * longest * (longest + 1) > 1e7)
    return conservative_dp(index, work_limit);
  result.sets = DpSets::exact;

  // states[(r_begin * window + r_length - 1) * (window + 1) + q_length]: the best partition of [0, r_end) ending with
  // blocks q = [r_begin - q_length, r_begin) and r = [r_begin, r_begin + r_length).
  std::vector<State> states(n * window * (window + 1));
  auto state = [&](std::size_t r_begin, std::size_t r_length, std::size_t q_length) -> State& {
    return states[(r_begin * window + r_length - 1) * (window + 1) + q_length];
  };
  auto finish_of = [&](std::size_t r_begin, std::size_t r_length, const State& pair) {
    return pair.start_s + index.compute_s(r_begin, r_begin + r_length);
  };

  // Per block start r: the tensors accessed in the window before it, at their last access there, once written
  // (candidates for Evict_s = W_q \ W_r \ W_s).
  struct Leaving {
    std::uint32_t tensor;
    std::size_t offset; // r_begin minus its last access before r_begin
    std::size_t next;   // its first access at or after r_begin
  };
  std::vector<std::vector<Leaving>> leaving(n);
  std::vector<std::size_t> stamp(problem.bytes.size(), n + 1);
  for (std::size_t r = 1; r < n; ++r)
    for (std::size_t d = 1; d <= window && d <= r; ++d)
      for (std::uint32_t t : problem.ops[r - d].tensors)
        if (stamp[t] != r) {
          stamp[t] = r;
          if (index.first_write(t) < r)
            leaving[r].push_back({t, d, index.next_access(t, r)});
        }

  // Per offset from s_begin (1 .. 2 window): prefetch bytes and counts of W_s's tensors last accessed there.
  std::vector<std::uint64_t> prefetch_bytes(2 * window + 2), prefetch_count(2 * window + 2);
  std::vector<std::uint64_t> evict_bytes(window + 2), evict_count(window + 2);
  std::vector<std::uint8_t> in_block(problem.bytes.size(), 0);
  std::vector<std::uint32_t> members;

  for (std::size_t s = 0; s < n; ++s) {
    std::fill(prefetch_bytes.begin(), prefetch_bytes.end(), 0);
    std::fill(prefetch_count.begin(), prefetch_count.end(), 0);
    for (std::uint32_t t : members)
      in_block[t] = 0;
    members.clear();
    std::uint64_t total_bytes = 0;
    std::uint64_t total_count = 0;
    for (std::size_t e = s + 1; e <= index.longest_end(s); ++e) {
      for (std::uint32_t t : problem.ops[e - 1].tensors) {
        if (in_block[t] != 0)
          continue;
        in_block[t] = 1;
        members.push_back(t);
        if (index.produced(t) && index.producer(t) >= s)
          continue; // Prod_s
        total_bytes += problem.bytes[t];
        ++total_count;
        const std::ptrdiff_t previous = index.previous_access(t, s);
        if (previous >= 0 && s - static_cast<std::size_t>(previous) <= 2 * window) {
          prefetch_bytes[s - static_cast<std::size_t>(previous)] += problem.bytes[t];
          ++prefetch_count[s - static_cast<std::size_t>(previous)];
        }
      }
      const double compute = index.compute_s(s, e);
      // Prefetch for the pair (q, r) with q starting `span` ops before s: the tensors last accessed before q.
      auto prefetch_for = [&](std::size_t span) {
        cost::Transfers transfers{0, total_bytes, total_count};
        for (std::size_t d = 1; d <= span; ++d) {
          transfers.prefetch_bytes -= prefetch_bytes[d];
          transfers.count -= prefetch_count[d];
        }
        return transfers;
      };
      if (s == 0) {
        State& target = state(0, e, 0);
        const cost::Times times = cost::next_block({}, cost::migration_s(problem, prefetch_for(0)), compute);
        target = {times.start_s, 1, 0};
        continue;
      }
      for (std::size_t r_length = 1; r_length <= window && r_length <= s; ++r_length) {
        const std::size_t r = s - r_length;
        if (index.longest_end(r) < s)
          continue;
        std::fill(evict_bytes.begin(), evict_bytes.end(), 0);
        std::fill(evict_count.begin(), evict_count.end(), 0);
        for (const Leaving& candidate : leaving[r])
          if (candidate.next >= e && (candidate.next < n || problem.needed_after[candidate.tensor] != 0)) {
            evict_bytes[candidate.offset] += problem.bytes[candidate.tensor];
            ++evict_count[candidate.offset];
          }
        cost::Transfers transfers = prefetch_for(r_length); // q empty: W_r alone is resident
        std::uint64_t evicted_bytes = 0;
        std::uint64_t evicted_count = 0;
        for (std::size_t q_length = 0; q_length <= window && q_length <= r; ++q_length) {
          if (q_length > 0) {
            const std::size_t d = r_length + q_length; // offset of q's first op from s
            transfers.prefetch_bytes -= prefetch_bytes[d];
            transfers.count -= prefetch_count[d];
            evicted_bytes += evict_bytes[q_length];
            evicted_count += evict_count[q_length];
            if (index.longest_end(r - q_length) < r)
              continue;
          } else if (r != 0) {
            continue; // only the first block has no block before it
          }
          const State& source = state(r, r_length, q_length);
          if (source.blocks == 0)
            continue;
          cost::Transfers with_evictions = transfers;
          with_evictions.write_back_bytes = evicted_bytes;
          with_evictions.count += evicted_count;
          const cost::Times times = cost::next_block({source.start_s, finish_of(r, r_length, source)},
                                                     cost::migration_s(problem, with_evictions), compute);
          State& target = state(s, e - s, r_length);
          if (target.blocks == 0 ||
              better(times.finish_s, source.blocks + 1u, finish_of(s, e - s, target), target.blocks))
            target = {times.start_s, source.blocks + 1u, static_cast<std::uint32_t>(q_length)};
        }
      }
    }
  }

  // The best final pair, then back through the stored lengths.
  const State* best = nullptr;
  double best_finish = 0;
  std::size_t best_begin = 0;
  std::size_t best_q = 0;
  for (std::size_t s = 0; s < n; ++s)
    if (index.longest_end(s) == n && n - s <= window)
      for (std::size_t q_length = 0; q_length <= window && q_length <= s; ++q_length) {
        const State& candidate = state(s, n - s, q_length);
        const double finish = finish_of(s, n - s, candidate);
        if (candidate.blocks > 0 && (best == nullptr || better(finish, candidate.blocks, best_finish, best->blocks))) {
          best = &candidate;
          best_finish = finish;
          best_begin = s;
          best_q = q_length;
        }
      }
  std::vector<std::size_t> ends{n};
  std::size_t begin = best_begin;
  std::size_t length = n - best_begin;
  std::size_t q_length = best_q;
  while (begin > 0) {
    ends.push_back(begin);
    const std::size_t previous = state(begin, length, q_length).previous_length;
    length = q_length;
    begin -= q_length;
    q_length = previous;
  }
  result.partition.assign(ends.rbegin(), ends.rend());
  result.cost_s = best_finish;
  return result;
}

} // namespace memsim::dynn::detail
