#include "async_account.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"
#include "memsim/sim/memory_cursor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <stdexcept>

namespace memsim::planning {
namespace {

void sort_unique(std::vector<StepId>& steps)
{
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
}

// The state of one moved tensor while the sequence is emitted.
struct MovedState {
  StepId offload = -1;
  StepId free_after_offload = -1; // -1 until emitted (with the cache: until evicted)
  StepId prefetch = -1;
  bool device_copy_counted = true; // pessimistic: until a compute or prefetch depends on its free
  bool cache_hit = false;
};

class SwapEmitter {
public:
  SwapEmitter(const TraceAnalysis& analysis, const std::vector<SequenceEntry>& sequence,
              const std::vector<MovedTensor>& moved, const SwapEmission& emission, Plan& plan)
      : trace_(analysis.trace()), sequence_(sequence), moved_(moved), emission_(emission), builder_(plan),
        memory_(analysis.flat(), analysis.resident_tensors()), state_(moved.size()), offloads_after_(sequence.size()),
        owned_ends_(emission.generation_ends ? FlatLists{} : generation_ends(analysis, sequence)),
        free_after_(emission.generation_ends ? *emission.generation_ends : owned_ends_),
        allocation_of_(sequence.size()), freed_bytes_(sequence.size()), moved_index_(trace_.tensors.size(), -1)
  {
    if (free_after_.size() != sequence.size())
      throw std::logic_error("emit_with_swaps: the given generation_ends are not the sequence's");
    // A step per entry, about one free per tensor, an offload, a prefetch and a free per move: one allocation
    // instead of a regrown vector (μ-TWO's exact check emits rings of 10^5 steps per decision).
    plan.steps.reserve(plan.steps.size() + sequence.size() + trace_.tensors.size() + 3 * moved.size());
    for (std::size_t i = 0; i < moved_.size(); ++i)
      moved_index_[static_cast<std::size_t>(moved_[i].tensor)] = static_cast<std::int64_t>(i);
    for (std::size_t i = 0; i < moved_.size(); ++i)
      offloads_after_[moved_[i].last_forward_use].push_back(i);
    // Prefetches in h2d stream order: by first backward use, then as given.
    prefetch_order_.resize(moved_.size());
    for (std::size_t i = 0; i < moved_.size(); ++i)
      prefetch_order_[i] = i;
    std::stable_sort(prefetch_order_.begin(), prefetch_order_.end(), [&](std::size_t a, std::size_t b) {
      return moved_[a].first_backward_use < moved_[b].first_backward_use;
    });
    for (std::size_t position = 0; position < sequence_.size(); ++position) {
      const Op& op = trace_.op(sequence_[position].op);
      allocation_of_[position] = op.workspace_bytes;
      for (TensorId id : op.outputs)
        allocation_of_[position] += trace_.tensor(id).bytes;
      for (TensorId id : free_after_[position])
        freed_bytes_[position] += trace_.tensor(id).bytes;
    }
  }

  SwapResult emit()
  {
    for (std::size_t position = 0; position < sequence_.size(); ++position)
      emit_entry(position);
    return {memory_.peak(), prefetches_, cache_hits_};
  }

private:
  void emit_entry(std::size_t position)
  {
    const SequenceEntry& entry = sequence_[position];
    const Op& op = trace_.op(entry.op);
    std::vector<StepId> deps;
    if (emission_.sync == SwapSync::layer) {
      // The transfers that ran with the previous entry are waited for now; those issued after it run with this one.
      std::vector<Transfer> still_running;
      for (const Transfer& transfer : in_flight_)
        if (transfer.runs_with < position)
          wait_for(transfer, deps);
        else
          still_running.push_back(transfer);
      in_flight_ = std::move(still_running);
    }
    // Prefetches this entry needs that have not been issued yet go now, right before it.
    while (next_prefetch_ < prefetch_order_.size() &&
           moved_[prefetch_order_[next_prefetch_]].first_backward_use <= position) {
      const std::size_t pending = prefetch_order_[next_prefetch_];
      if (!take_cache_hit(pending)) {
        const std::uint64_t extra = state_[pending].device_copy_counted ? 0 : bytes(pending);
        std::vector<StepId> room;
        if (!make_room(extra, room))
          throw fail(op, bytes(pending));
        deps.insert(deps.end(), room.begin(), room.end());
        issue_prefetch(pending, compute_stream_tail_, std::move(room), position);
      }
      ++next_prefetch_;
    }
    for (TensorId id : op.inputs)
      if (const std::int64_t index = moved_in_backward(id, position);
          index >= 0 && state_[static_cast<std::size_t>(index)].prefetch >= 0)
        deps.push_back(state_[static_cast<std::size_t>(index)].prefetch);
    // Offloads that start with their last forward reader.
    std::vector<std::size_t> started_offloads;
    if (emission_.offload_at_consumer_start)
      for (std::size_t index : offloads_after_[position])
        if (reads(op, moved_[index].tensor)) {
          start_offload(index, {compute_stream_tail_});
          started_offloads.push_back(index);
        }
    if (!make_room(allocation_of_[position], deps))
      throw fail(op, allocation_of_[position]);
    sort_unique(deps);
    const StepId compute =
        entry.recompute ? builder_.recompute(entry.op, std::move(deps)) : builder_.compute(entry.op, std::move(deps));
    memory_.run(entry.op);

    for (TensorId id : free_after_[position]) {
      const std::int64_t index = moved_in_backward(id, position);
      // A tensor whose offload may still be running is freed only after it.
      std::vector<StepId> free_deps;
      if (index >= 0 && state_[static_cast<std::size_t>(index)].offload >= 0 &&
          state_[static_cast<std::size_t>(index)].cache_hit)
        free_deps.push_back(state_[static_cast<std::size_t>(index)].offload);
      builder_.free(id, std::move(free_deps));
      memory_.free(id);
    }
    compute_stream_tail_ = builder_.last();
    for (std::size_t index : offloads_after_[position]) {
      const bool started = std::find(started_offloads.begin(), started_offloads.end(), index) != started_offloads.end();
      if (!started)
        start_offload(index, {compute});
      MovedState& state = state_[index];
      if (!emission_.cache) {
        std::vector<StepId> free_deps{state.offload};
        if (started)
          free_deps.push_back(compute); // the op that reads it must end first
        state.free_after_offload = builder_.free(moved_[index].tensor, std::move(free_deps), "d2h");
      } else if (started) {
        cache_readers_[index] = compute;
      }
      evictable_.push_back(index);
      in_flight_.push_back({index, false, started ? position : position + 1});
    }
    issue_ready_prefetches(position, compute_stream_tail_);
  }

  struct Transfer {
    std::size_t moved = 0;
    bool prefetch = false;
    std::size_t runs_with = 0; // the entry it runs in parallel with: the one after waits for it
  };

  std::uint64_t bytes(std::size_t index) const { return trace_.tensor(moved_[index].tensor).bytes; }
  std::uint64_t workspace_of(std::size_t position) const { return trace_.op(sequence_[position].op).workspace_bytes; }

  static bool reads(const Op& op, TensorId tensor)
  {
    return std::find(op.inputs.begin(), op.inputs.end(), tensor) != op.inputs.end();
  }

  // The moved tensor `id` is, once its backward region has started at `position`; -1 otherwise.
  std::int64_t moved_in_backward(TensorId id, std::size_t position) const
  {
    const std::int64_t index = moved_index_[static_cast<std::size_t>(id)];
    if (index < 0 || moved_[static_cast<std::size_t>(index)].first_backward_use > position)
      return -1;
    return index;
  }

  void start_offload(std::size_t index, std::vector<StepId> deps)
  {
    deps.erase(std::remove(deps.begin(), deps.end(), StepId{-1}), deps.end());
    state_[index].offload = builder_.offload(moved_[index].tensor, std::move(deps));
  }

  // The free step of an offloaded device copy; with the cache it is emitted when the copy is evicted.
  StepId free_step(std::size_t index)
  {
    MovedState& state = state_[index];
    if (state.free_after_offload < 0) {
      std::vector<StepId> deps{state.offload};
      if (const auto reader = cache_readers_.find(index); reader != cache_readers_.end())
        deps.push_back(reader->second);
      state.free_after_offload = builder_.free(moved_[index].tensor, std::move(deps));
    }
    return state.free_after_offload;
  }

  void release_offloaded(std::size_t index, std::vector<StepId>& deps)
  {
    MovedState& state = state_[index];
    if (!state.device_copy_counted)
      return;
    state.device_copy_counted = false;
    memory_.free(moved_[index].tensor);
    deps.push_back(free_step(index));
    evictable_.erase(std::remove(evictable_.begin(), evictable_.end(), index), evictable_.end());
  }

  // Makes room by waiting for finished offloads (oldest first) until `needed` more bytes fit.
  bool make_room(std::uint64_t needed, std::vector<StepId>& deps)
  {
    while (memory_.in_use() + needed > emission_.budget_bytes && !evictable_.empty())
      release_offloaded(evictable_.front(), deps);
    return memory_.in_use() + needed <= emission_.budget_bytes;
  }

  void wait_for(const Transfer& transfer, std::vector<StepId>& deps)
  {
    const MovedState& state = state_[transfer.moved];
    if (transfer.prefetch) {
      deps.push_back(state.prefetch);
    } else if (emission_.cache || !state.device_copy_counted) {
      deps.push_back(state.offload);
    } else {
      release_offloaded(transfer.moved, deps);
    }
  }

  // With the cache, a tensor whose device copy was not evicted is read from it: no transfer.
  bool take_cache_hit(std::size_t index)
  {
    MovedState& state = state_[index];
    if (!emission_.cache || !state.device_copy_counted)
      return false;
    state.cache_hit = true;
    evictable_.erase(std::remove(evictable_.begin(), evictable_.end(), index), evictable_.end());
    ++cache_hits_;
    return true;
  }

  Infeasible fail(const Op& op, std::uint64_t needed) const
  {
    return Infeasible(fmt::format("{} cannot fit op {} '{}': it needs {} more with {} in use, budget is {} ({} bytes)",
                                  emission_.planner, op.id, op.name, units::format_bytes(static_cast<double>(needed)),
                                  units::format_bytes(static_cast<double>(memory_.in_use())),
                                  units::format_bytes(static_cast<double>(emission_.budget_bytes)),
                                  emission_.budget_bytes));
  }

  // `room` are the frees the account released to make space for it: the prefetch must wait for them too.
  void issue_prefetch(std::size_t index, StepId after_compute, std::vector<StepId> room, std::size_t runs_with)
  {
    MovedState& state = state_[index];
    std::vector<StepId> deps = std::move(room);
    // The prefetch depends on the free, so from here on the old device copy is gone.
    release_offloaded(index, deps);
    deps.push_back(free_step(index));
    if (after_compute >= 0)
      deps.push_back(after_compute);
    sort_unique(deps);
    state.prefetch = builder_.prefetch(moved_[index].tensor, std::move(deps));
    memory_.bring(moved_[index].tensor);
    ++prefetches_;
    in_flight_.push_back({index, true, runs_with});
  }

  // Issues prefetches in stream order whose trigger has passed, as long as they fit.
  void issue_ready_prefetches(std::size_t completed, StepId completed_step)
  {
    while (next_prefetch_ < prefetch_order_.size()) {
      const std::size_t index = prefetch_order_[next_prefetch_];
      const MovedTensor& entry = moved_[index];
      if (entry.trigger > completed)
        break;
      if (take_cache_hit(index)) {
        ++next_prefetch_;
        continue;
      }
      // An early prefetch must leave room for what the entries before its consumer allocate, or it would force the
      // compute stream to fail later: the most those entries hold above today's bytes at once (their outputs
      // accumulate until the frees after them).
      const std::uint64_t extra = state_[index].device_copy_counted ? 0 : bytes(index);
      std::int64_t growth = 0;
      std::int64_t headroom = 0;
      for (std::size_t between = completed + 1; between < entry.first_backward_use; ++between) {
        headroom = std::max(headroom, growth + static_cast<std::int64_t>(allocation_of_[between]));
        growth += static_cast<std::int64_t>(allocation_of_[between] - workspace_of(between)) -
                  static_cast<std::int64_t>(freed_bytes_[between]);
      }
      if (memory_.in_use() + extra + static_cast<std::uint64_t>(headroom) > emission_.budget_bytes)
        break;
      issue_prefetch(index, completed_step, {}, completed + 1);
      ++next_prefetch_;
    }
  }

  const Trace& trace_;
  const std::vector<SequenceEntry>& sequence_;
  const std::vector<MovedTensor>& moved_;
  const SwapEmission& emission_;
  PlanBuilder builder_;
  MemoryCursor memory_;
  std::vector<MovedState> state_;
  std::vector<std::vector<std::size_t>> offloads_after_;
  FlatLists owned_ends_; // generation_ends when the caller gave none
  const FlatLists& free_after_;
  std::vector<std::uint64_t> allocation_of_; // outputs + workspace of each entry
  std::vector<std::uint64_t> freed_bytes_;   // what the frees after each entry release
  std::vector<std::int64_t> moved_index_;    // per tensor: its index in moved_, or -1
  std::vector<std::size_t> prefetch_order_;
  std::size_t next_prefetch_ = 0;
  std::deque<std::size_t> evictable_; // offloaded tensors whose device copy still counts, oldest offload first
  std::map<std::size_t, StepId> cache_readers_; // cached copies offloaded while their last forward reader ran
  std::vector<Transfer> in_flight_;             // with SwapSync::layer: transfers no compute has waited for yet
  // The last compute-stream step (an entry's frees follow it): what a prefetch counted after that entry waits for,
  // so that it cannot allocate before the frees the account already subtracted.
  StepId compute_stream_tail_ = -1;
  std::size_t prefetches_ = 0;
  std::size_t cache_hits_ = 0;
};

} // namespace

std::size_t backward_region_start(const Trace& trace, const std::vector<SequenceEntry>& sequence)
{
  for (std::size_t position = 0; position < sequence.size(); ++position)
    if (sequence[position].recompute || trace.op(sequence[position].op).phase == Phase::backward)
      return position;
  return sequence.size();
}

SwapResult emit_with_swaps(const TraceAnalysis& analysis, const std::vector<SequenceEntry>& sequence,
                           const std::vector<MovedTensor>& moved, const SwapEmission& emission, Plan& plan)
{
  return SwapEmitter(analysis, sequence, moved, emission, plan).emit();
}

} // namespace memsim::planning
