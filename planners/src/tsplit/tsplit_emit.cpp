#include "tsplit_emit.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"
#include "memsim/sim/flat_trace.hpp"
#include "memsim/sim/memory_cursor.hpp"
#include "memsim/sim/simulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>

namespace memsim::tsplit {
namespace {

bool is_feature_map(TensorKind kind) { return kind == TensorKind::activation || kind == TensorKind::gradient; }

void sort_unique(std::vector<StepId>& deps)
{
  deps.erase(std::remove(deps.begin(), deps.end(), StepId{-1}), deps.end());
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
}

// The micro-ops and micro-tensors of every split op, appended to the plan (ids continue the trace's).
struct Extras {
  std::map<std::pair<OpId, TensorId>, std::vector<TensorId>> parts_of; // by split op: its inputs' and outputs' parts
  std::vector<std::vector<OpId>> micro_ops;                            // per trace op
};

Extras add_extras(const Model& model, const Trace& trace, const Options& options, Plan& plan)
{
  Extras extras;
  extras.micro_ops.resize(trace.ops.size());
  auto next_tensor = [&] { return static_cast<TensorId>(trace.tensors.size() + plan.extra_tensors.size()); };
  auto split_tensor = [&](OpId op, TensorId id, int parts, std::int64_t extent) {
    const Tensor& whole = trace.tensor(id);
    std::vector<TensorId>& ids = extras.parts_of[{op, id}];
    for (int u = 0; u < parts; ++u) {
      Tensor part;
      part.id = next_tensor();
      part.name = fmt::format("{}#{}/{}", whole.name, u + 1, parts);
      part.bytes = part_bytes(whole.bytes, parts, u, extent);
      part.kind = whole.kind;
      ids.push_back(part.id);
      plan.extra_tensors.push_back(std::move(part));
    }
  };
  for (const Op& op : trace.ops) {
    const SplitDecision& decision = model.split_of(op.id);
    if (decision.parts <= 1)
      continue;
    const int parts = decision.parts;
    for (TensorId x : decision.inputs)
      split_tensor(op.id, x, parts, decision.extent);
    std::vector<TensorId> reduced; // outputs every micro-op adds into (weight gradients, statistics)
    for (TensorId y : op.outputs) {
      if (is_feature_map(trace.tensor(y).kind))
        split_tensor(op.id, y, parts, decision.extent);
      else
        reduced.push_back(y);
    }
    for (int u = 0; u < parts; ++u) {
      Op micro;
      micro.id = static_cast<OpId>(trace.ops.size() + plan.extra_ops.size());
      micro.name = fmt::format("{}#{}/{}", op.name, u + 1, parts);
      micro.type = op.type;
      micro.phase = op.phase;
      micro.layer = op.layer;
      for (TensorId input : op.inputs) {
        const bool split_input =
            std::find(decision.inputs.begin(), decision.inputs.end(), input) != decision.inputs.end();
        if (!split_input) {
          micro.inputs.push_back(input);
          continue;
        }
        // A halo reads the neighbouring parts too (spatial conv/pool: the rows next to its band).
        const std::vector<TensorId>& input_parts = extras.parts_of.at({op.id, input});
        for (int v = std::max(0, u - decision.halo); v <= std::min(parts - 1, u + decision.halo); ++v)
          micro.inputs.push_back(input_parts[static_cast<std::size_t>(v)]);
      }
      for (TensorId y : op.outputs) {
        if (is_feature_map(trace.tensor(y).kind))
          micro.outputs.push_back(extras.parts_of.at({op.id, y})[static_cast<std::size_t>(u)]);
        else if (u == 0)
          micro.outputs.push_back(y);
        else
          micro.inputs.push_back(y);
      }
      micro.workspace_bytes =
          options.split_workspace ? part_bytes(op.workspace_bytes, parts, u, decision.extent) : op.workspace_bytes;
      const double share = 1.0 / parts;
      if (op.flops)
        micro.flops = *op.flops * share;
      if (op.bytes_accessed)
        micro.bytes_accessed = *op.bytes_accessed * share;
      micro.split = op.split;
      micro.iteration = op.iteration;
      micro.split_of = SplitOf{op.id, u, parts, decision.dim};
      micro.has_time = false;
      extras.micro_ops[static_cast<std::size_t>(op.id)].push_back(micro.id);
      plan.extra_ops.push_back(std::move(micro));
    }
  }
  return extras;
}

class Emitter {
public:
  Emitter(const Model& model, const TraceAnalysis& analysis, const Machine& machine, std::uint64_t budget,
          const Options& options, std::optional<OpId> planned_through = std::nullopt)
      : model_(model), analysis_(analysis), trace_(analysis.trace()), machine_(machine), budget_(budget),
        options_(options), planned_through_(planned_through)
  {
  }

  Plan run()
  {
    extras_ = add_extras(model_, trace_, options_, plan_);
    extended_ = trace_with_extras(trace_, plan_);
    extended_ops_.emplace(extended_);
    cursor_.emplace(*extended_ops_, analysis_.resident_tensors());
    making_.assign(extended_.tensors.size(), -1);
    offload_of_.assign(extended_.tensors.size(), -1);
    free_of_.assign(extended_.tensors.size(), -1);
    index_configs();
    for (const Op& op : trace_.ops)
      walk(op);
    time_steps();
    plan_.estimate.peak_bytes = cursor_->peak(); // the pessimistic account bounds every timing's peak
    return std::move(plan_);
  }

private:
  // The plan's time is what the fast engine gives for its steps at the budget: the execution core's own timing, with
  // link sharing, not a private list schedule.
  void time_steps()
  {
    SimOptions simulation;
    simulation.record_timeline = false;
    if (planned_through_) { // the ops not planned yet need more: a GPU with room for the account's peak
      Machine roomy = machine_;
      roomy.gpus.at(0).memory = std::max(roomy.gpus.at(0).memory, cursor_->peak());
      plan_.budget_bytes = std::max(budget_, cursor_->peak()); // a partial plan is only timed, never returned
      const RunResult run = simulate_fast(trace_, roomy, plan_, simulation);
      if (!run.metrics.feasible || run.error)
        throw Infeasible(fmt::format("tsplit: the plan so far (through op {}) does not run: {}", *planned_through_,
                                     run.error ? run.error->message : "infeasible"));
      plan_.estimate.iteration_time_s = run.metrics.iteration_time_s;
      return;
    }
    Plan timed = plan_;
    timed.budget_bytes = budget_;
    const RunResult run = simulate_fast(trace_, machine_, timed, simulation);
    if (run.metrics.feasible && !run.error)
      plan_.estimate.iteration_time_s = run.metrics.iteration_time_s;
  }

  const TensorConfig& config(TensorId id) const { return model_.config(id); }

  void index_configs()
  {
    const std::size_t n = trace_.ops.size();
    prefetch_at_.resize(n);
    recompute_at_.resize(n);
    offload_after_.resize(n);
    split_view_after_.resize(n);
    gap_after_.resize(n);
    for (const Tensor& tensor : trace_.tensors) {
      const TensorConfig& c = config(tensor.id);
      const auto index = [](OpId op) { return static_cast<std::size_t>(op); };
      if (c.move == Move::swap) {
        prefetch_at_[index(c.trigger)].push_back(tensor.id);
        if (c.parts > 1) {
          const OpId leave = model_.last_read_before(tensor.id, c.gap_start).value_or(*analysis_.producer(tensor.id));
          split_view_after_[index(leave)].push_back(tensor.id);
        } else {
          offload_after_[index(*analysis_.producer(tensor.id))].push_back(tensor.id);
          gap_after_[index(c.gap_start)].push_back(tensor.id);
        }
      } else if (c.move == Move::recompute) {
        for (std::size_t g = 0; g < c.gaps.size(); ++g) {
          recompute_at_[index(c.gaps[g].until)].push_back(tensor.id);
          if (g > 0 || c.parts == 1) // a split input's parts are freed by its micro-ops; it comes back whole
            gap_after_[index(c.gaps[g].after)].push_back(tensor.id);
        }
      }
    }
    // A chain recomputed at one op runs in its producers' order.
    for (std::vector<TensorId>& chain : recompute_at_)
      std::stable_sort(chain.begin(), chain.end(),
                       [&](TensorId a, TensorId b) { return *analysis_.producer(a) < *analysis_.producer(b); });
  }

  Infeasible failure(const Op& op, std::uint64_t needed) const
  {
    return Infeasible(fmt::format("tsplit: cannot fit op {} '{}': it needs {} more with {} in use, budget is {} ({} "
                                  "bytes)",
                                  op.id, op.name, units::format_bytes(static_cast<double>(needed)),
                                  units::format_bytes(static_cast<double>(cursor_->in_use())),
                                  units::format_bytes(static_cast<double>(budget_)), budget_));
  }

  // Waits for finished offloads (oldest first) until `needed` more bytes fit. In a partial plan the ops after
  // `planned_through_` are not held to the budget; the op the greedy is at is held to the memory the model still
  // gives it (later decisions lower it to the budget), and where the account cannot get there it waits for every
  // pending free and goes on.
  void make_room(std::uint64_t needed, std::vector<StepId>& deps, const Op& op)
  {
    const bool unplanned = planned_through_ && walking_ > *planned_through_;
    const std::uint64_t limit = planned_through_ ? std::max(budget_, model_.memory(walking_)) : budget_;
    const auto over = [&] { return !unplanned && cursor_->in_use() + needed > limit; };
    while (over() && !pending_.empty()) {
      const TensorId tensor = pending_.front();
      pending_.pop_front();
      cursor_->free(tensor);
      deps.push_back(free_of_[static_cast<std::size_t>(tensor)]);
    }
    if (over() && !planned_through_)
      throw failure(op, needed);
  }

  // The device copy goes when the prefetch starts at the latest: it stops counting here.
  void settle(TensorId tensor, std::vector<StepId>& deps)
  {
    auto it = std::find(pending_.begin(), pending_.end(), tensor);
    if (it != pending_.end()) {
      pending_.erase(it);
      cursor_->free(tensor);
    }
    deps.push_back(free_of_[static_cast<std::size_t>(tensor)]);
  }

  StepId view(StepKind kind, TensorId parent, const std::vector<TensorId>& parts, std::vector<StepId> deps,
              const std::string& stream)
  {
    Step step;
    step.kind = kind;
    step.stream = stream;
    step.tensor = parent;
    step.parts = parts;
    sort_unique(deps);
    step.deps = std::move(deps);
    const StepId id = builder_.add(std::move(step));
    if (kind == StepKind::split) {
      cursor_->free(parent);
      for (TensorId part : parts) {
        cursor_->bring(part);
        making_[static_cast<std::size_t>(part)] = id;
      }
    } else {
      for (TensorId part : parts)
        cursor_->free(part);
      cursor_->bring(parent);
      making_[static_cast<std::size_t>(parent)] = id;
    }
    return id;
  }

  void prefetch(TensorId tensor, const Op& op)
  {
    const bool split = config(tensor).parts > 1;
    const std::vector<TensorId> pieces =
        split ? extras_.parts_of.at({config(tensor).gap_start, tensor}) : std::vector<TensorId>{tensor};
    std::vector<StepId> made;
    for (TensorId piece : pieces) {
      std::vector<StepId> deps{compute_tail_};
      settle(piece, deps);
      make_room(extended_.tensor(piece).bytes, deps, op);
      sort_unique(deps);
      const StepId step = builder_.prefetch(piece, std::move(deps));
      cursor_->bring(piece);
      making_[static_cast<std::size_t>(piece)] = step;
      made.push_back(step);
    }
    if (split)
      view(StepKind::merge, tensor, pieces, made, "h2d");
  }

  void recompute(TensorId tensor, const Op& consumer)
  {
    const Op& producer = trace_.op(*analysis_.producer(tensor));
    std::vector<StepId> deps;
    for (TensorId input : producer.inputs)
      deps.push_back(made_elsewhere(input));
    make_room(trace_.tensor(tensor).bytes + producer.workspace_bytes, deps, consumer);
    sort_unique(deps);
    const StepId step = builder_.recompute(producer.id, std::move(deps));
    cursor_->run(producer.id);
    making_[static_cast<std::size_t>(tensor)] = step;
    compute_tail_ = step;
  }

  // What a compute-stream step reading `tensor` waits for: the step that made it resident when that ran on another
  // stream (compute-stream order covers the rest, and keeps an untouched plan identical to keep-all's).
  StepId made_elsewhere(TensorId tensor) const
  {
    const StepId step = making_[static_cast<std::size_t>(tensor)];
    return step >= 0 && plan_.steps[static_cast<std::size_t>(step)].stream != "compute" ? step : -1;
  }

  StepId compute(const Op& op)
  {
    std::vector<StepId> deps;
    for (TensorId input : op.inputs)
      deps.push_back(made_elsewhere(input));
    std::uint64_t allocates = op.workspace_bytes;
    for (TensorId output : op.outputs)
      if (!cursor_->on_device(output))
        allocates += extended_.tensor(output).bytes;
    make_room(allocates, deps, op);
    sort_unique(deps);
    const StepId step = builder_.compute(op.id, std::move(deps));
    cursor_->run(op.id);
    for (TensorId output : op.outputs)
      making_[static_cast<std::size_t>(output)] = step;
    compute_tail_ = step;
    return step;
  }

  // Frees part v of every input split for `op`, after `step` (its last reader).
  void free_input_parts(OpId op, const SplitDecision& decision, std::size_t v, StepId step)
  {
    for (TensorId x : decision.inputs) {
      const TensorId part = extras_.parts_of.at({op, x})[v];
      if (config(x).move == Move::swap) {
        // Its own stream: on d2h it would queue behind the later parts' copies and serialise the pipeline.
        free_of_[static_cast<std::size_t>(part)] =
            builder_.free(part, {offload_of_[static_cast<std::size_t>(part)], step}, "d2h_free");
        pending_.push_back(part);
      } else {
        builder_.free(part);
        cursor_->free(part);
        compute_tail_ = builder_.last();
      }
    }
  }

  void run_split(const Op& op)
  {
    const SplitDecision& decision = model_.split_of(op.id);
    for (TensorId x : decision.inputs)
      if (config(x).move != Move::swap) // swapped inputs were split when their parts started leaving
        view(StepKind::split, x, extras_.parts_of.at({op.id, x}), {made_elsewhere(x)}, "compute");
    const std::vector<OpId>& micro_ops = extras_.micro_ops[static_cast<std::size_t>(op.id)];
    const auto halo = static_cast<std::size_t>(decision.halo);
    for (std::size_t u = 0; u < micro_ops.size(); ++u) {
      const StepId step = compute(extended_.op(micro_ops[u]));
      // Part v's last reader is micro-op v + halo; the last micro-op is the last reader of every part left.
      if (u >= halo)
        free_input_parts(op.id, decision, u - halo, step);
      if (u + 1 == micro_ops.size())
        for (std::size_t v = u >= halo ? u - halo + 1 : 0; v <= u; ++v)
          free_input_parts(op.id, decision, v, step);
    }
    for (TensorId y : op.outputs)
      if (is_feature_map(trace_.tensor(y).kind)) {
        view(StepKind::merge, y, extras_.parts_of.at({op.id, y}), {}, "compute");
        compute_tail_ = builder_.last();
      }
  }

  void walk(const Op& op)
  {
    walking_ = op.id;
    const auto k = static_cast<std::size_t>(op.id);
    for (TensorId tensor : prefetch_at_[k])
      prefetch(tensor, op);
    for (TensorId tensor : recompute_at_[k])
      recompute(tensor, op);
    const SplitDecision& decision = model_.split_of(op.id);
    StepId last_compute = -1;
    if (decision.parts > 1) {
      run_split(op);
      last_compute = compute_tail_;
    } else {
      last_compute = compute(op);
    }
    for (TensorId id : analysis_.released_after(op.id)) {
      if (std::find(decision.inputs.begin(), decision.inputs.end(), id) != decision.inputs.end())
        continue; // its parts are gone already
      builder_.free(id);
      cursor_->free(id);
      compute_tail_ = builder_.last();
    }
    for (TensorId tensor : offload_after_[k])
      offload_of_[static_cast<std::size_t>(tensor)] =
          builder_.offload(tensor, {making_[static_cast<std::size_t>(tensor)]});
    for (TensorId tensor : split_view_after_[k]) {
      const std::vector<TensorId>& parts = extras_.parts_of.at({config(tensor).gap_start, tensor});
      // After this op: the op that made it resident, or its last reader before the split, has finished.
      const StepId split =
          view(StepKind::split, tensor, parts, {making_[static_cast<std::size_t>(tensor)], last_compute}, "d2h");
      for (TensorId part : parts)
        offload_of_[static_cast<std::size_t>(part)] = builder_.offload(part, {split});
    }
    for (TensorId tensor : gap_after_[k]) {
      if (config(tensor).move == Move::swap) {
        free_of_[static_cast<std::size_t>(tensor)] =
            builder_.free(tensor, {offload_of_[static_cast<std::size_t>(tensor)], last_compute}, "d2h");
        pending_.push_back(tensor);
      } else {
        builder_.free(tensor);
        cursor_->free(tensor);
        compute_tail_ = builder_.last();
      }
    }
  }

  const Model& model_;
  const TraceAnalysis& analysis_;
  const Trace& trace_;
  const Machine& machine_;
  std::uint64_t budget_;
  Options options_;
  std::optional<OpId> planned_through_; // a partial plan (cost=simulated): the greedy has reached this op
  OpId walking_ = -1;                   // the trace op being emitted
  Plan plan_;
  PlanBuilder builder_{plan_};
  Extras extras_;
  Trace extended_;
  std::optional<FlatTrace> extended_ops_; // of extended_, for the cursor
  std::optional<MemoryCursor> cursor_;
  std::vector<StepId> making_;     // the step that last made each tensor resident (for other streams' deps)
  std::vector<StepId> offload_of_; // whole tensors and parts
  std::vector<StepId> free_of_;    // the d2h free after an offload
  std::deque<TensorId> pending_;   // offloaded device copies the account still counts
  StepId compute_tail_ = -1;       // the last compute-stream step
  std::vector<std::vector<TensorId>> prefetch_at_;
  std::vector<std::vector<TensorId>> recompute_at_;
  std::vector<std::vector<TensorId>> offload_after_;
  std::vector<std::vector<TensorId>> split_view_after_;
  std::vector<std::vector<TensorId>> gap_after_;
};

} // namespace

Plan emit_plan(const Model& model, const TraceAnalysis& analysis, const Machine& machine, std::uint64_t budget,
               const Options& options)
{
  return Emitter(model, analysis, machine, budget, options).run();
}

double simulate_partial_plan(const Model& model, const TraceAnalysis& analysis, const Machine& machine,
                             std::uint64_t budget, const Options& options, OpId planned_through)
{
  return *Emitter(model, analysis, machine, budget, options, planned_through).run().estimate.iteration_time_s;
}

} // namespace memsim::tsplit
