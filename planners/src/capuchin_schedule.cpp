#include "capuchin_schedule.hpp"

#include "default_schedule.hpp"
#include "recompute_on_demand.hpp"
#include "swap_recompute_stats.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"
#include "memsim/sim/memory_cursor.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>

namespace memsim::planning {

SwapTimeline list_schedule(const std::vector<double>& entry_time, const std::vector<MovedTensor>& moved,
                           const std::vector<double>& d2h_time, const std::vector<double>& h2d_time)
{
  SwapTimeline timeline;
  const std::size_t entries = entry_time.size();
  timeline.start.assign(entries, 0);
  timeline.end.assign(entries, 0);
  timeline.offload_end.assign(moved.size(), 0);
  timeline.prefetch_end.assign(moved.size(), 0);
  std::vector<std::size_t> by_offload(moved.size()), by_prefetch(moved.size());
  std::iota(by_offload.begin(), by_offload.end(), std::size_t{0});
  std::iota(by_prefetch.begin(), by_prefetch.end(), std::size_t{0});
  std::stable_sort(by_offload.begin(), by_offload.end(),
                   [&](std::size_t a, std::size_t b) { return moved[a].last_forward_use < moved[b].last_forward_use; });
  std::stable_sort(by_prefetch.begin(), by_prefetch.end(), [&](std::size_t a, std::size_t b) {
    return moved[a].first_backward_use < moved[b].first_backward_use;
  });
  std::size_t next_offload = 0, next_prefetch = 0;
  double d2h_free = 0, h2d_free = 0, compute_free = 0;
  for (std::size_t position = 0; position < entries; ++position) {
    // Prefetches due by this entry; their triggers and offloads ran before it.
    double ready = compute_free;
    while (next_prefetch < by_prefetch.size() && moved[by_prefetch[next_prefetch]].first_backward_use <= position) {
      const std::size_t i = by_prefetch[next_prefetch++];
      const double start = std::max({timeline.end[moved[i].trigger], h2d_free, timeline.offload_end[i]});
      h2d_free = timeline.prefetch_end[i] = start + h2d_time[i];
      if (moved[i].first_backward_use == position)
        ready = std::max(ready, timeline.prefetch_end[i]);
    }
    timeline.start[position] = ready;
    compute_free = timeline.end[position] = ready + entry_time[position];
    while (next_offload < by_offload.size() && moved[by_offload[next_offload]].last_forward_use == position) {
      const std::size_t i = by_offload[next_offload++];
      d2h_free = timeline.offload_end[i] = std::max(d2h_free, compute_free) + d2h_time[i];
    }
  }
  return timeline;
}

std::vector<std::uint64_t> replay_memory(const TraceAnalysis& analysis, const std::vector<SequenceEntry>& sequence,
                                         const std::vector<MovedTensor>& moved, const SwapTimeline& timeline,
                                         OffloadRelease release, std::uint64_t& peak)
{
  return replay_memory(analysis, sequence, generation_ends(analysis, sequence), moved, timeline, release, peak);
}

std::vector<std::uint64_t> replay_memory(const TraceAnalysis& analysis, const std::vector<SequenceEntry>& sequence,
                                         const FlatLists& ends, const std::vector<MovedTensor>& moved,
                                         const SwapTimeline& timeline, OffloadRelease release, std::uint64_t& peak)
{
  const std::size_t entries = sequence.size();
  // Within a position only the sums count: the frees come before the brings, and neither order among themselves
  // changes the memory or the peak.
  std::vector<std::pair<std::size_t, TensorId>> releases, brings;
  releases.reserve(moved.size());
  brings.reserve(moved.size());
  for (std::size_t i = 0; i < moved.size(); ++i) {
    std::size_t at = moved[i].last_forward_use;
    if (release == OffloadRelease::safe)
      while (at < moved[i].trigger && timeline.end[at] < timeline.offload_end[i])
        ++at;
    releases.emplace_back(at, moved[i].tensor);
    brings.emplace_back(moved[i].trigger, moved[i].tensor);
  }
  const FlatLists release_after(entries, releases), bring_after(entries, brings);
  MemoryCursor cursor(analysis.flat(), analysis.resident_tensors());
  std::vector<std::uint64_t> memory;
  memory.reserve(entries);
  for (std::size_t position = 0; position < entries; ++position) {
    memory.push_back(cursor.run(sequence[position].op));
    for (TensorId id : ends[position])
      if (cursor.on_device(id))
        cursor.free(id);
    for (TensorId id : release_after[position])
      cursor.free(id);
    for (TensorId id : bring_after[position])
      cursor.bring(id);
  }
  peak = cursor.peak();
  return memory;
}

namespace {

// The sequence of the current decisions and the positions the scheduler reasons about.
struct Layout {
  std::vector<SequenceEntry> sequence;
  std::vector<MovedTensor> moved;
  std::size_t backward_start = 0;
  std::vector<std::int64_t> last_forward_use, first_backward_use, last_use; // per tensor, -1: none
  std::vector<std::int64_t> position_of_op;                                 // its non-recompute entry
};

class Scheduler {
public:
  Scheduler(const Trace& trace, const Machine& machine, const CapuchinOptions& options)
      : trace_(trace), machine_(machine), options_(options), analysis_(trace),
        stats_(graph_stats(analysis_, machine, options.idle_metric)), op_time_(stats_.op_time),
        inactive_s_(stats_.inactive_s), read_by_backward_(stats_.read_by_backward), dropped_(trace.ops.size(), false),
        swapped_(trace.tensors.size(), false), rejected_(trace.tensors.size(), false)
  {
    const std::string gpu = machine.gpus.at(0).name;
    d2h_ = host_link(machine, gpu, kHostNodeName);
    h2d_ = host_link(machine, kHostNodeName, gpu);
  }

  CapuchinSchedule run()
  {
    CapuchinSchedule result;
    for (;;) {
      Layout layout = make_layout();
      const Profile profile = replay(layout);
      if (profile.peak <= options_.budget_bytes && try_emit(layout, profile, result))
        return result;
      std::vector<TensorId> candidates = live_candidates(layout, profile);
      if (candidates.empty())
        throw Infeasible(fmt::format("{}: the candidates ran out with the schedule's peak at {} ({} bytes) over the "
                                     "budget {} ({} bytes) after {} swaps and recomputations",
                                     options_.planner, units::format_bytes(static_cast<double>(profile.peak)),
                                     profile.peak, units::format_bytes(static_cast<double>(options_.budget_bytes)),
                                     options_.budget_bytes, result.choices.size()));
      choose(candidates, layout, profile, result);
    }
  }

private:
  struct Profile {
    std::vector<std::uint64_t> memory; // bytes in use while each entry runs
    std::uint64_t peak = 0;
    SwapTimeline timeline;
  };
  struct Swap {
    TensorId tensor = 0;
    SequenceEntry prompt; // the entry before which its prefetch is issued
  };

  Layout make_layout() const
  {
    Layout layout;
    layout.sequence = recompute_on_demand(analysis_, dropped_, RecomputeMode::lineage);
    layout.backward_start = backward_region_start(trace_, layout.sequence);
    const std::size_t tensors = trace_.tensors.size();
    layout.last_forward_use.assign(tensors, -1);
    layout.first_backward_use.assign(tensors, -1);
    layout.last_use.assign(tensors, -1);
    layout.position_of_op.assign(trace_.ops.size(), -1);
    for (std::size_t position = 0; position < layout.sequence.size(); ++position) {
      const SequenceEntry& entry = layout.sequence[position];
      const Op& op = trace_.op(entry.op);
      const auto at = static_cast<std::int64_t>(position);
      if (!entry.recompute)
        layout.position_of_op[static_cast<std::size_t>(entry.op)] = at;
      for (TensorId id : op.inputs)
        layout.last_use[static_cast<std::size_t>(id)] = at;
      if (position < layout.backward_start) {
        for (TensorId id : op.outputs)
          layout.last_forward_use[static_cast<std::size_t>(id)] = at;
        for (TensorId id : op.inputs)
          layout.last_forward_use[static_cast<std::size_t>(id)] = at;
      } else {
        for (TensorId id : op.inputs)
          if (layout.first_backward_use[static_cast<std::size_t>(id)] < 0)
            layout.first_backward_use[static_cast<std::size_t>(id)] = at;
      }
    }
    for (const Swap& swap : swaps_) {
      const auto index = static_cast<std::size_t>(swap.tensor);
      const auto last_forward = static_cast<std::size_t>(layout.last_forward_use[index]);
      const auto first_backward = static_cast<std::size_t>(layout.first_backward_use[index]);
      const std::size_t prompt = position_of(layout, swap.prompt).value_or(first_backward);
      const std::size_t trigger =
          std::clamp<std::size_t>(prompt == 0 ? 0 : prompt - 1, last_forward, first_backward - 1);
      layout.moved.push_back({swap.tensor, last_forward, first_backward, trigger});
    }
    return layout;
  }

  // The first entry of the backward region that is `entry`.
  static std::optional<std::size_t> position_of(const Layout& layout, const SequenceEntry& entry)
  {
    for (std::size_t position = layout.backward_start; position < layout.sequence.size(); ++position)
      if (layout.sequence[position].op == entry.op && layout.sequence[position].recompute == entry.recompute)
        return position;
    return std::nullopt;
  }

  std::vector<double> entry_times(const Layout& layout) const
  {
    std::vector<double> times;
    times.reserve(layout.sequence.size());
    for (const SequenceEntry& entry : layout.sequence)
      times.push_back(op_time_[static_cast<std::size_t>(entry.op)]);
    return times;
  }

  SwapTimeline timeline_of(const Layout& layout) const
  {
    std::vector<double> d2h, h2d;
    for (const MovedTensor& moved : layout.moved) {
      d2h.push_back(d2h_.time(trace_.tensor(moved.tensor).bytes));
      h2d.push_back(h2d_.time(trace_.tensor(moved.tensor).bytes));
    }
    return list_schedule(entry_times(layout), layout.moved, d2h, h2d);
  }

  Profile replay(const Layout& layout) const
  {
    Profile profile;
    profile.timeline = timeline_of(layout);
    profile.memory = replay_memory(analysis_, layout.sequence, layout.moved, profile.timeline, options_.offload_release,
                                   profile.peak);
    return profile;
  }

  // The exact check: the plan emitted with memory-safe deps runs within the budget on the fast engine.
  bool try_emit(const Layout& layout, const Profile& profile, CapuchinSchedule& result) const
  {
    Plan plan;
    plan.budget_bytes = options_.budget_bytes;
    SwapEmission emission;
    emission.planner = options_.planner;
    emission.budget_bytes = options_.budget_bytes;
    const bool keep_all = result.choices.empty();
    if (keep_all) {
      plan = default_schedule(trace_, analysis_); // nothing moved: exactly keep-all (frees as the framework did)
      plan.budget_bytes = options_.budget_bytes;
    } else {
      try {
        emit_with_swaps(analysis_, layout.sequence, layout.moved, emission, plan);
      } catch (const Infeasible&) {
        return false;
      }
    }
    SimOptions simulation;
    simulation.record_timeline = false;
    const RunResult run = simulate_fast(trace_, machine_, plan, simulation);
    if (run.error || !run.metrics.feasible || run.metrics.peak_device_bytes > options_.budget_bytes)
      return false;
    plan.estimate.peak_bytes = run.metrics.peak_device_bytes;
    result.plan = std::move(plan);
    result.estimate_s = profile.timeline.end.empty() ? 0 : profile.timeline.end.back();
    return true;
  }

  bool undecided_candidate(const Tensor& tensor) const
  {
    const auto producer = analysis_.producer(tensor.id);
    return tensor.kind == TensorKind::activation && producer && forward_like(trace_.op(*producer).phase) &&
           read_by_backward_[static_cast<std::size_t>(tensor.id)] && !dropped_[static_cast<std::size_t>(*producer)] &&
           !swapped_[static_cast<std::size_t>(tensor.id)] && !rejected_[static_cast<std::size_t>(tensor.id)];
  }

  // A2: the undecided candidates live at an entry over the budget; all undecided ones when none is (the exact
  // check needs more room than the profile shows).
  std::vector<TensorId> live_candidates(const Layout& layout, const Profile& profile) const
  {
    std::vector<std::size_t> over_before(profile.memory.size() + 1, 0);
    for (std::size_t i = 0; i < profile.memory.size(); ++i)
      over_before[i + 1] = over_before[i] + (profile.memory[i] > options_.budget_bytes ? 1 : 0);
    std::vector<TensorId> live, all;
    for (const Tensor& tensor : trace_.tensors) {
      if (!undecided_candidate(tensor))
        continue;
      all.push_back(tensor.id);
      const auto first =
          static_cast<std::size_t>(layout.position_of_op[static_cast<std::size_t>(*analysis_.producer(tensor.id))]);
      const auto last = static_cast<std::size_t>(layout.last_use[static_cast<std::size_t>(tensor.id)]);
      if (over_before[last + 1] > over_before[first])
        live.push_back(tensor.id);
    }
    return live.empty() ? all : live;
  }

  Lineage lineage(TensorId target) const { return recompute_lineage(analysis_, stats_, dropped_, swapped_, target); }

  // Alg. C without a partner forward (cases 1(a)/1(b) and the backward scan): the stall of swapping `tensor` and
  // the entry before which its prefetch is issued.
  std::pair<double, std::size_t> swap_overhead(TensorId tensor, const Layout& layout, const Profile& profile)
  {
    const auto b = static_cast<std::size_t>(layout.first_backward_use[static_cast<std::size_t>(tensor)]);
    const std::vector<double> times = entry_times(layout);
    // Recomputations queued right before b hide the tail of the transfer.
    double t = h2d_.time(trace_.tensor(tensor).bytes);
    for (std::size_t p = b; p > layout.backward_start && layout.sequence[p - 1].recompute; --p)
      t -= times[p - 1];
    const std::size_t last_prompt =
        last_prompt_ ? position_of(layout, *last_prompt_).value_or(layout.sequence.size()) : layout.sequence.size();
    if (reached_peak_) {
      if (b < last_prompt)
        return {std::max(t, 0.0), b};
      return {std::max(t, 0.0) + last_swap_s_, b};
    }
    // H2D is serial: pack back to back from the end. The window [p, b) must stay within the budget: `profile`
    // already counts the tensor there (it is still kept), and the prefetch keeps it there again.
    std::size_t p = std::min(b, last_prompt);
    bool window_fits = true;
    for (std::size_t n = p; n < b; ++n)
      window_fits = window_fits && profile.memory[n] <= options_.budget_bytes;
    std::size_t prompt = p;
    while (t > 0 && window_fits && p > layout.backward_start) {
      --p;
      if (profile.memory[p] > options_.budget_bytes) {
        window_fits = false;
        break;
      }
      t -= times[p];
      prompt = p;
    }
    if (!window_fits)
      reached_peak_ = true;
    return {std::max(t, 0.0), prompt};
  }

  void choose(const std::vector<TensorId>& candidates, const Layout& layout, const Profile& profile,
              CapuchinSchedule& result)
  {
    // s: the longest inactive time (ties: the lower id).
    TensorId s = candidates.front();
    for (TensorId id : candidates)
      if (inactive_s_[static_cast<std::size_t>(id)] > inactive_s_[static_cast<std::size_t>(s)])
        s = id;
    const bool reached_before = reached_peak_;
    auto [swap_s, prompt] = swap_overhead(s, layout, profile);
    // r: the most bytes saved per second of total recomputation (Alg. E/F: regenerated once for itself and once
    // for each chosen recomputation that uses it as a source).
    std::map<TensorId, int> source_count;
    for (const CapuchinChoice& choice : result.choices)
      if (choice.decision == Decision::recompute)
        for (TensorId source : lineage(choice.tensor).sources)
          ++source_count[source];
    std::optional<TensorId> r;
    double r_total = std::numeric_limits<double>::infinity(), best_ratio = -1;
    Lineage r_lineage;
    for (TensorId id : candidates) {
      Lineage candidate = lineage(id);
      if (!candidate.possible)
        continue;
      const auto count = source_count.find(id);
      const double total = candidate.time_s * (1 + (count == source_count.end() ? 0 : count->second));
      const double ratio =
          total > 0 ? static_cast<double>(trace_.tensor(id).bytes) / total : std::numeric_limits<double>::infinity();
      if (ratio > best_ratio) {
        best_ratio = ratio;
        r = id;
        r_total = total;
        r_lineage = std::move(candidate);
      }
    }
    if (!r && !(swap_s < std::numeric_limits<double>::infinity())) {
      rejected_[static_cast<std::size_t>(s)] = true; // neither movable nor recomputable
      reached_peak_ = reached_before;
      return;
    }
    if (!r || swap_s < r_total) {
      swapped_[static_cast<std::size_t>(s)] = true;
      result.swapped_bytes += trace_.tensor(s).bytes;
      SequenceEntry anchor = layout.sequence[prompt];
      swaps_.push_back({s, anchor});
      last_prompt_ = anchor;
      last_swap_s_ = h2d_.time(trace_.tensor(s).bytes);
      result.choices.push_back({s, Decision::swap, swap_s});
      return;
    }
    reached_peak_ = reached_before; // the scan was for a swap not taken
    for (OpId op : r_lineage.ops) {
      if (dropped_[static_cast<std::size_t>(op)])
        continue;
      dropped_[static_cast<std::size_t>(op)] = true;
      for (TensorId out : trace_.op(op).outputs)
        if (read_by_backward_[static_cast<std::size_t>(out)])
          result.recomputed_bytes += trace_.tensor(out).bytes;
    }
    result.choices.push_back({*r, Decision::recompute, r_total});
  }

  const Trace& trace_;
  const Machine& machine_;
  CapuchinOptions options_;
  TraceAnalysis analysis_;
  GraphStats stats_;
  const std::vector<double>& op_time_;
  const std::vector<double>& inactive_s_;
  const std::vector<bool>& read_by_backward_;
  HostLink d2h_, h2d_;
  std::vector<bool> dropped_;  // by op: outputs freed after their forward reads, recomputed for the backward
  std::vector<bool> swapped_;  // by tensor
  std::vector<bool> rejected_; // by tensor: no host link and no recomputation possible
  std::vector<Swap> swaps_;
  std::optional<SequenceEntry> last_prompt_;
  double last_swap_s_ = 0;
  bool reached_peak_ = false;
};

} // namespace

CapuchinSchedule schedule_capuchin(const Trace& trace, const Machine& machine, const CapuchinOptions& options)
{
  return Scheduler(trace, machine, options).run();
}

} // namespace memsim::planning
