// The runtime's exact migration sets and times for a partition (spec dynn-offload.md §2.6, §1.7): what the emitted
// plan does step by step, and the planner's estimate.
#include "dp_cost.hpp"

#include <algorithm>

namespace memsim::dynn {

Schedule schedule_blocks(const BlockIndex& index, const Partition& partition, const ScheduleBoundary& boundary)
{
  const BlockProblem& problem = index.problem();
  const std::size_t tensors = problem.bytes.size();
  std::vector<std::uint8_t> resident(tensors, 0);
  // Whether the host holds the current value: tensors that exist before the sequence start on the host.
  std::vector<std::uint8_t> host_current(tensors, 0);
  for (std::uint32_t t = 0; t < tensors; ++t)
    host_current[t] = index.produced(t) ? 0 : 1;
  for (std::uint32_t t : boundary.resident_at_start)
    resident[t] = 1;
  for (std::uint32_t t : boundary.stale_at_start)
    host_current[t] = 0;
  std::vector<std::uint8_t> in_previous(tensors, 0); // W_{j-1}
  std::vector<std::uint8_t> in_current(tensors, 0);  // W_j

  Schedule schedule;
  cost::Times times;
  std::size_t begin = 0;
  for (std::size_t end : partition) {
    BlockSchedule block;
    block.begin = begin;
    block.end = end;
    std::fill(in_current.begin(), in_current.end(), 0);
    for (std::size_t i = begin; i < end; ++i)
      for (std::uint32_t t : problem.ops[i].tensors)
        in_current[t] = 1;
    cost::Transfers transfers;
    for (std::uint32_t t = 0; t < tensors; ++t) {
      if (in_current[t] != 0)
        block.working_set.push_back(t);
      if (resident[t] != 0 && in_previous[t] == 0 && in_current[t] == 0) {
        block.evict.push_back(t);
        if (host_current[t] == 0 && index.used_from(t, end)) {
          block.write_back.push_back(t);
          host_current[t] = 1;
          transfers.write_back_bytes += problem.bytes[t];
          ++transfers.count;
        }
        resident[t] = 0;
      }
    }
    for (std::uint32_t t : block.working_set) {
      const bool produced_here = index.produced(t) && index.producer(t) >= begin;
      if (resident[t] == 0 && !produced_here) {
        block.prefetch.push_back(t);
        resident[t] = 1;
        transfers.prefetch_bytes += problem.bytes[t];
        ++transfers.count;
      }
    }
    schedule.h2d_bytes += transfers.prefetch_bytes;
    schedule.d2h_bytes += transfers.write_back_bytes;
    block.compute_s = index.compute_s(begin, end);
    block.migration_s = cost::migration_s(problem, transfers);
    times = cost::next_block(times, block.migration_s, block.compute_s);
    block.start_s = times.start_s;
    block.finish_s = times.finish_s;
    for (std::size_t i = begin; i < end; ++i) {
      for (std::uint32_t t : problem.ops[i].produced) {
        resident[t] = 1;
        host_current[t] = 0;
      }
      for (std::uint32_t t : problem.ops[i].updated)
        host_current[t] = 0;
    }
    std::swap(in_previous, in_current);
    schedule.blocks.push_back(std::move(block));
    begin = end;
  }

  cost::Transfers flush;
  for (std::uint32_t t = 0; t < tensors; ++t)
    if (resident[t] != 0) {
      if (!boundary.keep.empty() && boundary.keep[t] != 0) {
        schedule.kept.push_back(t);
        if (host_current[t] == 0)
          schedule.kept_stale.push_back(t);
        continue;
      }
      schedule.flush_free.push_back(t);
      if (host_current[t] == 0 && problem.needed_after[t] != 0) {
        schedule.flush_write_back.push_back(t);
        flush.write_back_bytes += problem.bytes[t];
        ++flush.count;
      }
    }
  schedule.d2h_bytes += flush.write_back_bytes;
  schedule.flush_s = cost::migration_s(problem, flush);
  schedule.end_s = times.finish_s + schedule.flush_s;
  return schedule;
}

} // namespace memsim::dynn
