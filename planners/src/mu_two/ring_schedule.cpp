#include "ring_schedule.hpp"

#include "ring_state.hpp"

#include "../recompute_on_demand.hpp"
#include "../sequence.hpp"
#include "../swap_recompute_stats.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"
#include "memsim/sim/memory_floor.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>

namespace memsim::planning::mu_two {
namespace {

constexpr int kProbeCopy = 0;             // decisions are reasoned about on every sub-array's first iteration (cycle 0)
constexpr int kScheduleCycles = 2;        // cycle 0 sees the steady state: the prologue plays the previous cycle's part
constexpr std::size_t kCachedLayouts = 8; // bisection probes come and go; the current placement is rebuilt at once
constexpr std::size_t kSpareRings = 8;    // dropped rings kept for their allocations (a cache clear frees 8)
// Rounds between progress lines and state saves (0.1-2 s each near the largest N).
constexpr std::size_t kProgressRounds = 25;

// What a placement alone fixes: the unrolled ring and its analysis. Recompute decisions change only the sequence
// over it, so it outlives them (building it was most of the planning time at large N).
struct UnrolledRing {
  RingTrace ring;
  std::unique_ptr<TraceAnalysis> analysis; // of ring.trace; an UnrolledRing is never moved once built
};

// What a placement and the recompute decisions fix: the unrolled ring, its sequence and positions. Swaps only add
// transfers on top, so one layout serves every probe that shares its placement (planning time at large N).
struct Layout {
  std::shared_ptr<const UnrolledRing> unrolled;
  const RingTrace& ring() const { return unrolled->ring; }
  const TraceAnalysis& analysis() const { return *unrolled->analysis; }
  std::vector<SequenceEntry> sequence;
  std::vector<int> cycle_of; // per position: the cycle it runs in (the prologue is cycle 0)
  std::vector<int> graph_of; // per position: its merged graph (RingTrace::op_graph)
  std::vector<bool> in_prologue;
  std::vector<std::int64_t> last_forward_use, first_backward_use, produced_at, last_use; // per tensor, -1: none
  std::vector<std::int64_t> position_of_op, position_of_recompute; // per op: its first compute / recompute entry, -1
  std::vector<double> times;
  FlatLists ends; // generation_ends of the sequence, for replay_memory
};

// The unrolled ring under a set of decisions: its layout, moved tensors, estimated timeline and memory.
struct View {
  std::shared_ptr<const Layout> base;
  std::vector<MovedTensor> moved;
  std::vector<std::uint64_t> memory;
  std::uint64_t peak = 0;
  SwapTimeline timeline;

  // The estimator's time of cycle c: the end of its last entry minus the end of the entries before it.
  double cycle_time(int cycle) const
  {
    double before = 0, end = 0;
    for (std::size_t p = 0; p < base->sequence.size(); ++p) {
      const bool earlier = base->cycle_of[p] < cycle || (cycle == 0 && base->in_prologue[p]);
      if (earlier)
        before = std::max(before, timeline.end[p]);
      else if (base->cycle_of[p] == cycle)
        end = std::max(end, timeline.end[p]);
    }
    return end - before;
  }
};

class RingScheduler {
public:
  RingScheduler(const std::vector<const Trace*>& graphs, const Machine& machine, const RingOptions& options)
      : graphs_(graphs), machine_(machine), options_(options)
  {
    // Probe layouts are built from copies without names, types and shapes, which nothing but the emitted ring needs:
    // the scheduler builds thousands of them at large N, and their strings were most of the time.
    for (const Trace* graph : graphs) {
      Trace& bare = bare_graphs_.emplace_back(*graph);
      for (Op& op : bare.ops) {
        op.name.clear();
        op.type.clear();
        op.split.clear();
      }
      for (Tensor& tensor : bare.tensors) {
        tensor.name.clear();
        tensor.shape.clear();
      }
    }
    for (const Trace& bare : bare_graphs_)
      bare_graph_ptrs_.push_back(&bare);
    for (const Trace* graph : graphs) {
      analyses_.push_back(std::make_unique<TraceAnalysis>(*graph));
      stats_.push_back(graph_stats(*analyses_.back(), machine, options.idle_metric));
      halves_.push_back(halves(*graph));
      dropped_.emplace_back(graph->ops.size(), false);
      swapped_.emplace_back(graph->tensors.size(), false);
      rejected_.emplace_back(graph->tensors.size(), false);
      std::vector<std::int64_t> index(graph->ops.size(), -1);
      for (std::size_t k = 0; k < halves_.back().backward.size(); ++k)
        index[static_cast<std::size_t>(halves_.back().backward[k])] = static_cast<std::int64_t>(k);
      backward_index_.push_back(std::move(index));
    }
    const std::string gpu = machine.gpus.at(0).name;
    d2h_ = host_link(machine, gpu, kHostNodeName);
    h2d_ = host_link(machine, kHostNodeName, gpu);
  }

  RingSchedule run()
  {
    refuse_below_floor();
    RingSchedule result;
    const std::size_t resumed = resume(result);
    for (std::size_t round = resumed;; ++round) {
      if (!state_file_.empty() && round > resumed && round % kProgressRounds == 0)
        save_ring_state(state_file_, fingerprint_, snapshot(result, round));
      const View view = make_view(placement_, kScheduleCycles, swaps_);
      if (options_.progress && round % kProgressRounds == 0)
        options_.progress(fmt::format("{}: round {}, {} decisions, estimated peak {}{}", options_.label, round,
                                      result.decisions.size(), units::format_bytes(static_cast<double>(view.peak)),
                                      view.peak <= options_.budget_bytes ? " (checking on the fast engine)" : ""));
      if (view.peak <= options_.budget_bytes && try_emit(result)) {
        forget_state();
        return result;
      }
      const std::vector<std::pair<int, TensorId>> candidates = live_candidates(view);
      if (candidates.empty())
        forget_state(); // the search ends here: a rerun would only repeat the refusal
      if (candidates.empty() && view.peak <= options_.budget_bytes)
        throw Infeasible(fmt::format("{}: the candidates ran out after {} swaps and recomputations with the ring's "
                                     "estimated peak at {} ({} bytes), within the budget {} ({} bytes), but the "
                                     "emitted ring does not fit it on the fast engine: {}",
                                     options_.planner, result.decisions.size(),
                                     units::format_bytes(static_cast<double>(view.peak)), view.peak,
                                     units::format_bytes(static_cast<double>(options_.budget_bytes)),
                                     options_.budget_bytes, named_exact_failure()));
      if (candidates.empty())
        throw Infeasible(fmt::format("{}: the candidates ran out with the ring's peak at {} ({} bytes) over the "
                                     "budget {} ({} bytes) after {} swaps and recomputations",
                                     options_.planner, units::format_bytes(static_cast<double>(view.peak)), view.peak,
                                     units::format_bytes(static_cast<double>(options_.budget_bytes)),
                                     options_.budget_bytes, result.decisions.size()));
      choose(candidates, view, result);
    }
  }

private:
  // The state saved for this ring in options_.state_dir, if any, restored into the scheduler and `result`; the round
  // to continue from (0 without one).
  std::size_t resume(RingSchedule& result)
  {
    if (options_.state_dir.empty())
      return 0;
    std::error_code error; // a folder that cannot hold the state fails now, not at the first save an hour in
    std::filesystem::create_directories(options_.state_dir, error);
    if (error)
      throw InputError(options_.state_dir.string(), "cannot create the state folder: " + error.message());
    fingerprint_ = ring_fingerprint(graphs_, stats_, d2h_, h2d_, options_);
    state_file_ = ring_state_file(options_.state_dir, options_.label, fingerprint_);
    std::optional<RingState> state = load_ring_state(state_file_, fingerprint_, graphs_);
    if (!state)
      return 0;
    dropped_ = std::move(state->dropped);
    swapped_ = std::move(state->swapped);
    rejected_ = std::move(state->rejected);
    swaps_ = std::move(state->swaps);
    placement_ = std::move(state->placement);
    last_prompt_ = state->last_prompt;
    reached_peak_ = state->reached_peak;
    result.decisions = std::move(state->decisions);
    result.swapped_bytes = state->swapped_bytes;
    result.recomputed_bytes = state->recomputed_bytes;
    result.multiplexed_ops = state->multiplexed_ops;
    if (options_.progress)
      options_.progress(fmt::format("{}: resumed at round {} with {} decisions from {}", options_.label, state->round,
                                    result.decisions.size(), state_file_.string()));
    return state->round;
  }

  RingState snapshot(const RingSchedule& result, std::size_t round) const
  {
    return RingState{round,
                     dropped_,
                     swapped_,
                     rejected_,
                     swaps_,
                     placement_,
                     last_prompt_,
                     reached_peak_,
                     result.decisions,
                     result.swapped_bytes,
                     result.recomputed_bytes,
                     result.multiplexed_ops};
  }

  void forget_state() const
  {
    if (!state_file_.empty())
      std::filesystem::remove(state_file_);
  }

  const Trace& graph(int j) const { return *graphs_[static_cast<std::size_t>(j)]; }
  int sub_arrays() const { return static_cast<int>(graphs_.size()); }

  // Refuses at once a ring that no decisions can fit, where the loop would spend every candidate to learn it (hours
  // at the largest N). Candidates are activations, so every sub-array's preexisting tensors (weights, optimizer
  // state, inputs) stay resident from t = 0 to their uses in the last cycle; every op of every graph runs in the
  // prologue or cycle 0, and with a later cycle those tensors are all resident then, beside what the op holds.
  void refuse_below_floor() const
  {
    if (options_.cycles < 2)
      return; // one cycle: an op may run after the last use of another sub-array's weights
    std::uint64_t preexisting = 0, working = 0;
    int worst_graph = 0;
    OpId worst_op = 0;
    for (int j = 0; j < sub_arrays(); ++j) {
      const TraceAnalysis& analysis = *analyses_[static_cast<std::size_t>(j)];
      preexisting += preexisting_bytes(analysis);
      for (const Op& op : graph(j).ops)
        if (const std::uint64_t bytes = working_bytes(analysis, op.id); bytes > working) {
          working = bytes;
          worst_graph = j;
          worst_op = op.id;
        }
    }
    if (preexisting + working <= options_.budget_bytes)
      return;
    throw Infeasible(fmt::format(
        "{}: {} cannot fit the budget {} ({} bytes) whatever is swapped or recomputed: its sub-arrays' weights, "
        "optimizer state and inputs take {} ({} bytes) throughout, and op '{}' of sub-array {} holds {} ({} bytes) "
        "more while it runs (its inputs, outputs and workspace), {} bytes in all",
        options_.planner, options_.label, units::format_bytes(static_cast<double>(options_.budget_bytes)),
        options_.budget_bytes, units::format_bytes(static_cast<double>(preexisting)), preexisting,
        graph(worst_graph).op(worst_op).name, worst_graph, units::format_bytes(static_cast<double>(working)), working,
        preexisting + working));
  }

  // The fast engine's run of `plan` on a ring trace, without a timeline (the checks read only its metrics).
  RunResult simulate_ring(const Trace& ring, const Plan& plan) const
  {
    SimOptions simulation;
    simulation.record_timeline = false;
    return simulate_fast(ring, machine_, plan, simulation);
  }

  std::shared_ptr<const Layout> layout(const Placement& placement, int cycles) const
  {
    const auto key = std::make_pair(cycles, placement);
    if (const auto found = layouts_.find(key); found != layouts_.end())
      return found->second;
    auto built = std::make_shared<Layout>();
    built->unrolled = unrolled_ring(key);
    const RingTrace& ring = built->ring();
    const Trace& trace = ring.trace;
    std::vector<bool> dropped(trace.ops.size(), false);
    for (std::size_t op = 0; op < trace.ops.size(); ++op) {
      const Origin& origin = ring.op_origin[op];
      dropped[op] = dropped_[static_cast<std::size_t>(origin.sub_array)][origin.id];
    }
    built->sequence = recompute_on_demand(built->analysis(), dropped, RecomputeMode::lineage);
    const std::size_t entries = built->sequence.size();
    built->cycle_of.assign(entries, 0);
    built->graph_of.assign(entries, -1);
    built->in_prologue.assign(entries, false);
    int next_cycle = cycles - 1, next_graph = -1;
    bool next_prologue = false;
    for (std::size_t p = entries; p-- > 0;) { // a recompute belongs to the backward op after it
      const SequenceEntry& entry = built->sequence[p];
      if (!entry.recompute) {
        next_graph = ring.op_graph[static_cast<std::size_t>(entry.op)];
        next_cycle = next_graph < 0 ? 0 : next_graph / sub_arrays(); // G_j(c) is c·m + j; the prologue is cycle 0's
        next_prologue = static_cast<std::size_t>(entry.op) < ring.prologue_ops;
      }
      built->cycle_of[p] = next_cycle;
      built->graph_of[p] = next_graph;
      built->in_prologue[p] = next_prologue;
    }
    const std::size_t tensors = trace.tensors.size();
    built->last_forward_use.assign(tensors, -1);
    built->first_backward_use.assign(tensors, -1);
    built->produced_at.assign(tensors, -1);
    built->last_use.assign(tensors, -1);
    built->times.reserve(entries);
    built->position_of_op.assign(trace.ops.size(), -1);
    built->position_of_recompute.assign(trace.ops.size(), -1);
    const TraceAnalysis& analysis = built->analysis();
    for (std::size_t p = 0; p < entries; ++p) {
      const SequenceEntry& entry = built->sequence[p];
      const std::span<const TensorId> inputs = analysis.inputs(entry.op), outputs = analysis.outputs(entry.op);
      const Origin& origin = ring.op_origin[static_cast<std::size_t>(entry.op)];
      built->times.push_back(stats_[static_cast<std::size_t>(origin.sub_array)].op_time[origin.id]);
      std::int64_t& first =
          (entry.recompute ? built->position_of_recompute : built->position_of_op)[static_cast<std::size_t>(entry.op)];
      if (first < 0)
        first = static_cast<std::int64_t>(p);
      const auto at = static_cast<std::int64_t>(p);
      for (TensorId id : inputs)
        built->last_use[static_cast<std::size_t>(id)] = at;
      if (!entry.recompute && forward_like(analysis.phase(entry.op))) {
        for (TensorId id : outputs) {
          built->last_forward_use[static_cast<std::size_t>(id)] = at;
          built->produced_at[static_cast<std::size_t>(id)] = at;
        }
        for (TensorId id : inputs)
          built->last_forward_use[static_cast<std::size_t>(id)] = at;
      } else {
        for (TensorId id : inputs)
          if (built->first_backward_use[static_cast<std::size_t>(id)] < 0)
            built->first_backward_use[static_cast<std::size_t>(id)] = at;
      }
    }
    built->ends = generation_ends(built->analysis(), built->sequence);
    if (layouts_.size() >= kCachedLayouts)
      layouts_.clear();
    layouts_.emplace(key, built);
    return built;
  }

  std::shared_ptr<const UnrolledRing> unrolled_ring(const std::pair<int, Placement>& key) const
  {
    if (const auto found = rings_.find(key); found != rings_.end())
      return found->second;
    // A ring nothing holds any more lends its allocations to the next one (spare_rings_).
    std::shared_ptr<UnrolledRing> built(new UnrolledRing, [spare = spare_rings_](UnrolledRing* done) {
      done->analysis.reset(); // it refers to the trace
      if (spare->size() < kSpareRings)
        spare->push_back(std::move(done->ring));
      delete done;
    });
    RingTrace storage;
    if (!spare_rings_->empty()) {
      storage = std::move(spare_rings_->back());
      spare_rings_->pop_back();
    }
    built->ring = build_ring_trace(bare_graph_ptrs_, key.first, key.second, RingNames::none, std::move(storage));
    built->analysis = std::make_unique<TraceAnalysis>(built->ring.trace);
    if (rings_.size() >= kCachedLayouts)
      rings_.clear();
    rings_.emplace(key, built);
    return built;
  }

  View make_view(const Placement& placement, int cycles, const std::vector<SwapChoice>& swaps) const
  {
    View view;
    view.base = layout(placement, cycles);
    const Layout& base = *view.base;
    for (const SwapChoice& swap : swaps)
      for (int copy = 0; copy <= cycles; ++copy) {
        const TensorId id =
            base.ring().tensor_copy[static_cast<std::size_t>(swap.sub_array)][static_cast<std::size_t>(swap.tensor)]
                                   [static_cast<std::size_t>(copy)];
        if (id < 0)
          continue;
        const std::int64_t last_forward = base.last_forward_use[static_cast<std::size_t>(id)];
        const std::int64_t first_backward = base.first_backward_use[static_cast<std::size_t>(id)];
        if (last_forward < 0 || first_backward <= last_forward)
          continue;
        std::int64_t prompt = first_backward;
        if (swap.prompt)
          if (const std::optional<std::size_t> at = position(view, *swap.prompt, copy))
            prompt = static_cast<std::int64_t>(*at);
        const std::int64_t trigger = std::clamp<std::int64_t>(prompt - 1, last_forward, first_backward - 1);
        view.moved.push_back({id, static_cast<std::size_t>(last_forward), static_cast<std::size_t>(first_backward),
                              static_cast<std::size_t>(trigger)});
      }
    std::vector<double> d2h, h2d;
    const std::vector<std::uint64_t>& bytes = base.analysis().tensor_bytes();
    for (const MovedTensor& moved : view.moved) {
      d2h.push_back(d2h_.time(bytes[static_cast<std::size_t>(moved.tensor)]));
      h2d.push_back(h2d_.time(bytes[static_cast<std::size_t>(moved.tensor)]));
    }
    view.timeline = list_schedule(base.times, view.moved, d2h, h2d);
    view.memory = replay_memory(base.analysis(), base.sequence, base.ends, view.moved, view.timeline,
                                options_.offload_release, view.peak);
    return view;
  }

  std::optional<std::size_t> position(const View& view, const PromptRef& prompt, int copy) const
  {
    const int target = copy + prompt.copy_delta;
    if (target < 0 || target > view.base->ring().cycles)
      return std::nullopt;
    const OpId op = view.base->ring().op_copy[static_cast<std::size_t>(prompt.sub_array)]
                                             [static_cast<std::size_t>(prompt.op)][static_cast<std::size_t>(target)];
    if (op < 0)
      return std::nullopt;
    const std::int64_t at =
        (prompt.recompute ? view.base->position_of_recompute : view.base->position_of_op)[static_cast<std::size_t>(op)];
    return at < 0 ? std::nullopt : std::optional<std::size_t>(static_cast<std::size_t>(at));
  }

  PromptRef prompt_at(const View& view, std::size_t position, int copy) const
  {
    const SequenceEntry& entry = view.base->sequence[position];
    const Origin& origin = view.base->ring().op_origin[static_cast<std::size_t>(entry.op)];
    return {origin.sub_array, static_cast<OpId>(origin.id), entry.recompute, origin.copy - copy};
  }

  TensorId probe_copy(const View& view, int j, TensorId tensor) const
  {
    return view.base->ring().tensor_copy[static_cast<std::size_t>(j)][static_cast<std::size_t>(tensor)][kProbeCopy];
  }

  bool undecided(int j, const Tensor& tensor) const
  {
    const auto sub = static_cast<std::size_t>(j);
    const auto producer = analyses_[sub]->producer(tensor.id);
    const auto index = static_cast<std::size_t>(tensor.id);
    return tensor.kind == TensorKind::activation && producer && forward_like(graph(j).op(*producer).phase) &&
           stats_[sub].read_by_backward[index] && !dropped_[sub][static_cast<std::size_t>(*producer)] &&
           !swapped_[sub][index] && !rejected_[sub][index];
  }

  // A2 on the unrolled ring: undecided candidates one of whose first two iterations is live at a position over the
  // budget; all undecided ones when none is.
  std::vector<std::pair<int, TensorId>> live_candidates(const View& view) const
  {
    std::vector<std::size_t> over_before(view.memory.size() + 1, 0);
    for (std::size_t i = 0; i < view.memory.size(); ++i)
      over_before[i + 1] = over_before[i] + (view.memory[i] > options_.budget_bytes ? 1 : 0);
    std::vector<std::pair<int, TensorId>> live, all;
    for (int j = 0; j < sub_arrays(); ++j)
      for (const Tensor& tensor : graph(j).tensors) {
        if (!undecided(j, tensor))
          continue;
        all.emplace_back(j, tensor.id);
        for (int copy = 0; copy < kScheduleCycles; ++copy) {
          const TensorId id =
              view.base->ring().tensor_copy[static_cast<std::size_t>(j)][static_cast<std::size_t>(tensor.id)]
                                           [static_cast<std::size_t>(copy)];
          if (id < 0 || view.base->produced_at[static_cast<std::size_t>(id)] < 0)
            continue;
          const auto first = static_cast<std::size_t>(view.base->produced_at[static_cast<std::size_t>(id)]);
          const auto last = static_cast<std::size_t>(view.base->last_use[static_cast<std::size_t>(id)]);
          if (over_before[last + 1] > over_before[first]) {
            live.emplace_back(j, tensor.id);
            break;
          }
        }
      }
    return live.empty() ? all : live;
  }

  // `placement` with at least `count` forward ops of the next sub-array before BW_j's op k and every later one.
  Placement raised(int j, std::size_t k, std::size_t count) const
  {
    Placement result = placement_;
    result.resize(static_cast<std::size_t>(sub_arrays()));
    std::vector<std::size_t>& before = result[static_cast<std::size_t>(j)];
    before.resize(halves_[static_cast<std::size_t>(j)].backward.size(), 0);
    for (std::size_t i = k; i < before.size(); ++i)
      before[i] = std::max(before[i], count);
    return result;
  }

  std::size_t placed_before(int j, std::size_t k) const
  {
    if (static_cast<std::size_t>(j) >= placement_.size() || k >= placement_[static_cast<std::size_t>(j)].size())
      return 0;
    return placement_[static_cast<std::size_t>(j)][k];
  }

  struct SwapOption {
    double stall_s = 0;
    std::optional<PromptRef> prompt;
    Placement placement;
    std::size_t multiplexed = 0;
    bool reached_peak = false;
    const char* swap_case = "";
  };

  std::vector<SwapChoice> with_swap(int j, TensorId tensor, std::optional<PromptRef> prompt) const
  {
    std::vector<SwapChoice> swaps = swaps_;
    swaps.push_back({j, tensor, prompt});
    return swaps;
  }

  // No position in [from, to) is over the budget and the peak did not rise above `limit`.
  bool memory_safe(const View& view, std::size_t from, std::size_t to, std::uint64_t limit) const
  {
    if (view.peak > limit)
      return false;
    for (std::size_t p = from; p < to && p < view.memory.size(); ++p)
      if (view.memory[p] > options_.budget_bytes)
        return false;
    return true;
  }

  // Alg. C (see the header): multiplex forward ops, then scan back over backward entries; the stall is the
  // estimator's increase of the probe cycle.
  SwapOption swap_option(int j, TensorId tensor, const View& view) const
  {
    SwapOption option;
    option.placement = placement_;
    const double before_s = view.cycle_time(kProbeCopy);
    const TensorId id = probe_copy(view, j, tensor);
    const std::uint64_t bytes = graph(j).tensor(tensor).bytes;
    const auto b = static_cast<std::size_t>(view.base->first_backward_use[static_cast<std::size_t>(id)]);
    double hide_s = h2d_.time(bytes);
    for (std::size_t p = b; p > 0 && view.base->sequence[p - 1].recompute; --p)
      hide_s -= view.base->times[p - 1];
    const std::optional<std::size_t> last_prompt =
        last_prompt_ ? position(view, *last_prompt_, kProbeCopy) : std::nullopt;
    auto stall_with = [&](const Placement& placement, std::optional<PromptRef> prompt) {
      const View after = make_view(placement, kScheduleCycles, with_swap(j, tensor, prompt));
      return std::max(0.0, after.cycle_time(kProbeCopy) - before_s);
    };
    if (reached_peak_) { // case 1: no room before b any more
      option.reached_peak = true;
      option.swap_case = !last_prompt || b < *last_prompt ? "1a" : "1b";
      option.stall_s = stall_with(placement_, std::nullopt);
      return option;
    }
    // The backward op of sub-array j at or after b (b may be a recompute entry that reads the tensor).
    std::size_t k = 0;
    for (std::size_t p = b; p < view.base->sequence.size(); ++p) {
      const Origin& origin = view.base->ring().op_origin[static_cast<std::size_t>(view.base->sequence[p].op)];
      const std::int64_t index = backward_index_[static_cast<std::size_t>(j)][origin.id];
      if (!view.base->sequence[p].recompute && origin.sub_array == j && index >= 0) {
        k = static_cast<std::size_t>(index);
        break;
      }
    }
    const int next = (j + 1) % sub_arrays();
    const std::vector<OpId>& forward = halves_[static_cast<std::size_t>(next)].forward;
    const std::size_t already = placed_before(j, k);
    std::size_t wanted = already;
    for (double covered = 0; options_.multiplex && sub_arrays() > 1 && covered < hide_s && wanted < forward.size();
         ++wanted)
      covered += stats_[static_cast<std::size_t>(next)].op_time[static_cast<std::size_t>(forward[wanted])];
    const PromptRef first_moved{next, wanted > already ? forward[already] : 0, false, j + 1 < sub_arrays() ? 0 : 1};
    std::optional<View> chosen;
    auto try_count = [&](std::size_t count) -> std::optional<View> {
      View candidate = make_view(raised(j, k, count), kScheduleCycles, with_swap(j, tensor, first_moved));
      const std::optional<std::size_t> from = position(candidate, first_moved, kProbeCopy);
      const TensorId moved_id = probe_copy(candidate, j, tensor);
      const auto to = static_cast<std::size_t>(candidate.base->first_backward_use[static_cast<std::size_t>(moved_id)]);
      if (from && memory_safe(candidate, *from, to, std::max(view.peak, options_.budget_bytes)))
        return candidate;
      return std::nullopt;
    };
    std::size_t count = already;
    if (wanted > already) {
      if ((chosen = try_count(wanted))) {
        count = wanted;
      } else {                                    // the most forward ops that stay memory safe
        std::size_t low = already, high = wanted; // low is safe (nothing moved), high is not
        while (high - low > 1) {
          const std::size_t middle = low + (high - low) / 2;
          if (std::optional<View> safe = try_count(middle)) {
            low = middle;
            chosen = std::move(safe);
          } else {
            high = middle;
          }
        }
        count = low;
        if (count == already)
          chosen.reset();
      }
    }
    option.multiplexed = count - already;
    if (option.multiplexed > 0)
      option.placement = raised(j, k, count);
    const View& layout = chosen ? *chosen : view;
    // The backward scan: issue the prefetch earlier, over the merged graph's entries before the window (no further
    // back than the graph's first entry), while every position keeps room for the tensor.
    const TensorId moved_id = probe_copy(layout, j, tensor);
    const auto deadline = static_cast<std::size_t>(layout.base->first_backward_use[static_cast<std::size_t>(moved_id)]);
    std::size_t floor = deadline;
    while (floor > 0 && layout.base->graph_of[floor - 1] == layout.base->graph_of[deadline])
      --floor;
    floor = std::max(floor,
                     static_cast<std::size_t>(layout.base->last_forward_use[static_cast<std::size_t>(moved_id)]) + 1);
    std::size_t start = deadline;
    if (option.multiplexed > 0)
      start = position(layout, first_moved, kProbeCopy).value_or(deadline);
    double remaining = hide_s;
    for (std::size_t p = start; p < deadline; ++p)
      remaining -= layout.base->times[p];
    std::size_t prompt = start;
    bool scanned = false;
    while (remaining > 0 && prompt > floor) {
      if (layout.memory[prompt - 1] + bytes > options_.budget_bytes) {
        option.reached_peak = true; // the peak interval: later swaps are prefetched at their use (case 1)
        break;
      }
      const std::size_t q = prompt - 1;
      remaining -= layout.base->times[q];
      prompt = q;
      scanned = true;
    }
    option.prompt = prompt_at(layout, prompt, kProbeCopy);
    option.stall_s = stall_with(option.placement, option.prompt);
    if (option.stall_s > 0)
      option.swap_case = "3";
    else
      option.swap_case = option.multiplexed > 0 && !scanned ? "2a" : "2b";
    return option;
  }

  void choose(const std::vector<std::pair<int, TensorId>>& candidates, const View& view, RingSchedule& result)
  {
    auto inactive = [&](const std::pair<int, TensorId>& c) {
      return stats_[static_cast<std::size_t>(c.first)].inactive_s[static_cast<std::size_t>(c.second)];
    };
    std::pair<int, TensorId> s = candidates.front();
    for (const auto& c : candidates)
      if (inactive(c) > inactive(s))
        s = c;
    const SwapOption swap = h2d_.bandwidth > 0 ? swap_option(s.first, s.second, view) : SwapOption{};
    const double swap_s = h2d_.bandwidth > 0 ? swap.stall_s : std::numeric_limits<double>::infinity();
    // r: the most bytes saved per second of total recomputation (Alg. E/F), per sub-array's own recomputations.
    std::vector<std::map<TensorId, int>> source_count(graphs_.size());
    for (const RingDecision& decision : result.decisions)
      if (decision.decision == Decision::recompute)
        for (TensorId source : lineage(decision.sub_array, decision.tensor).sources)
          ++source_count[static_cast<std::size_t>(decision.sub_array)][source];
    std::optional<std::pair<int, TensorId>> r;
    double r_total = std::numeric_limits<double>::infinity(), best_ratio = -1;
    Lineage r_lineage;
    for (const auto& c : candidates) {
      Lineage candidate = lineage(c.first, c.second);
      if (!candidate.possible)
        continue;
      const auto& counts = source_count[static_cast<std::size_t>(c.first)];
      const auto count = counts.find(c.second);
      const double total = candidate.time_s * (1 + (count == counts.end() ? 0 : count->second));
      const double ratio = total > 0 ? static_cast<double>(graph(c.first).tensor(c.second).bytes) / total
                                     : std::numeric_limits<double>::infinity();
      if (ratio > best_ratio) {
        best_ratio = ratio;
        r = c;
        r_total = total;
        r_lineage = std::move(candidate);
      }
    }
    const auto s_index = static_cast<std::size_t>(s.first);
    if (!r && !(swap_s < std::numeric_limits<double>::infinity())) {
      rejected_[s_index][static_cast<std::size_t>(s.second)] = true;
      return;
    }
    if (!r || swap_s < r_total) {
      swapped_[s_index][static_cast<std::size_t>(s.second)] = true;
      result.swapped_bytes += graph(s.first).tensor(s.second).bytes;
      swaps_.push_back({s.first, s.second, swap.prompt});
      placement_ = swap.placement;
      result.multiplexed_ops += swap.multiplexed;
      if (swap.prompt)
        last_prompt_ = swap.prompt;
      reached_peak_ = reached_peak_ || swap.reached_peak;
      result.decisions.push_back({s.first, s.second, Decision::swap, swap_s, swap.swap_case, swap.multiplexed});
      return;
    }
    const auto r_index = static_cast<std::size_t>(r->first);
    for (OpId op : r_lineage.ops) {
      if (dropped_[r_index][static_cast<std::size_t>(op)])
        continue;
      dropped_[r_index][static_cast<std::size_t>(op)] = true;
      for (TensorId out : graph(r->first).op(op).outputs)
        if (stats_[r_index].read_by_backward[static_cast<std::size_t>(out)])
          result.recomputed_bytes += graph(r->first).tensor(out).bytes;
    }
    layouts_.clear(); // the layouts' sequences hold the old recompute decisions
    result.decisions.push_back({r->first, r->second, Decision::recompute, r_total, "", 0});
  }

  Lineage lineage(int j, TensorId tensor) const
  {
    const auto sub = static_cast<std::size_t>(j);
    return recompute_lineage(*analyses_[sub], stats_[sub], dropped_[sub], swapped_[sub], tensor);
  }

  // The ring's plan for the current decisions, each step in the cycle of the compute entry it follows. Throws
  // Infeasible when the emitter's account does not fit. `analysis`: of the view's ring or of the same ring with names.
  Plan exact_plan(const View& view, const TraceAnalysis& analysis) const
  {
    Plan plan;
    plan.budget_bytes = options_.budget_bytes;
    SwapEmission emission;
    emission.planner = options_.planner;
    emission.budget_bytes = options_.budget_bytes;
    emission.generation_ends = &view.base->ends;
    emit_with_swaps(analysis, view.base->sequence, view.moved, emission, plan);
    std::size_t position = 0; // steps come out in sequence order
    int cycle = 0;
    for (Step& step : plan.steps) {
      if (step.kind == StepKind::compute || step.kind == StepKind::recompute)
        cycle = view.base->cycle_of[std::min(position++, view.base->cycle_of.size() - 1)];
      step.iteration = cycle;
    }
    return plan;
  }

  // Why `run` does not fit the budget, or nullopt when it does.
  std::optional<std::string> exact_failure(const RunResult& run) const
  {
    if (run.error)
      return run.error->message;
    if (!run.metrics.feasible || run.metrics.peak_device_bytes > options_.budget_bytes)
      return fmt::format("peak {} ({} bytes)", units::format_bytes(static_cast<double>(run.metrics.peak_device_bytes)),
                         run.metrics.peak_device_bytes);
    return std::nullopt;
  }

  // The last exact check's failure again, on the named ring, so that the message names its tensors (the checks
  // themselves run the probe ring, whose tensors have no names).
  std::string named_exact_failure() const
  {
    const View view = make_view(placement_, options_.cycles, swaps_);
    const RingTrace ring = build_ring_trace(graphs_, options_.cycles, placement_);
    const TraceAnalysis analysis(ring.trace);
    Plan plan;
    try {
      plan = exact_plan(view, analysis);
    } catch (const Infeasible& error) {
      return error.what();
    }
    const std::optional<std::string> failure = exact_failure(simulate_ring(ring.trace, plan));
    if (!failure)
      throw std::logic_error("mu-two: the named ring fits where the probe ring did not");
    return *failure;
  }

  // The exact check: the emitted ring (options.cycles cycles) runs within the budget on the fast engine.
  bool try_emit(RingSchedule& result) const
  {
    const View view = make_view(placement_, options_.cycles, swaps_);
    Plan plan;
    try {
      plan = exact_plan(view, view.base->analysis());
    } catch (const Infeasible&) {
      return false;
    }
    // The probe ring lacks only names, types and shapes, which the engine does not read: a failed check (thousands
    // of them once the estimator fits and the engine does not) then costs no named ring.
    const RunResult run = simulate_ring(view.base->ring().trace, plan);
    if (exact_failure(run))
      return false;
    // The same ring with its names and shapes: the builder assigns ids in the same order either way.
    RingTrace ring = build_ring_trace(graphs_, options_.cycles, placement_);
    if (ring.trace.ops.size() != view.base->ring().trace.ops.size() ||
        ring.trace.tensors.size() != view.base->ring().trace.tensors.size())
      throw std::logic_error("mu-two: the named ring differs from the probed one");
    double steady = 0;
    for (int c = 1; c < options_.cycles; ++c)
      steady += view.cycle_time(c);
    // One cycle: the simulator's only iteration also holds the prologue.
    result.estimate_s = options_.cycles > 1 ? steady / (options_.cycles - 1) : view.timeline.end.back();
    result.peak_bytes = run.metrics.peak_device_bytes;
    plan.estimate.peak_bytes = run.metrics.peak_device_bytes;
    plan.estimate.iteration_time_s = result.estimate_s;
    result.plan = std::move(plan);
    result.ring = std::move(ring);
    return true;
  }

  const std::vector<const Trace*>& graphs_;
  std::deque<Trace> bare_graphs_; // graphs_ without names and shapes (stable addresses)
  std::vector<const Trace*> bare_graph_ptrs_;
  const Machine& machine_;
  RingOptions options_;
  std::vector<std::unique_ptr<TraceAnalysis>> analyses_;
  std::vector<GraphStats> stats_;
  std::vector<Halves> halves_;
  std::vector<std::vector<std::int64_t>> backward_index_; // per sub-array, per op: its index in the backward half
  HostLink d2h_, h2d_;
  std::vector<std::vector<bool>> dropped_, swapped_, rejected_;
  std::vector<SwapChoice> swaps_;
  Placement placement_;
  std::optional<PromptRef> last_prompt_;
  // Dropped probe rings, kept for their allocations (shared with the rings' deleters, which fill it).
  std::shared_ptr<std::vector<RingTrace>> spare_rings_ = std::make_shared<std::vector<RingTrace>>();
  mutable std::map<std::pair<int, Placement>, std::shared_ptr<const Layout>> layouts_;     // per (cycles, placement)
  mutable std::map<std::pair<int, Placement>, std::shared_ptr<const UnrolledRing>> rings_; // kept across recomputes
  bool reached_peak_ = false;
  std::filesystem::path state_file_; // empty: the state is not kept
  std::string fingerprint_;
};

} // namespace

RingSchedule schedule_ring(const std::vector<const Trace*>& graphs, const Machine& machine, const RingOptions& options)
{
  return RingScheduler(graphs, machine, options).run();
}

} // namespace memsim::planning::mu_two
