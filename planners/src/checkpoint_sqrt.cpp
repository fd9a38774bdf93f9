// checkpoint-sqrt (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost"): split the chain into ~sqrt(n)
// segments, keep only each segment's input during the forward phase, and recompute a segment's forward just before
// its backward. The last segment is not recomputed: its backward follows its forward directly.
//
// mode=budget is the greedy of Chen et al. as the TSPLIT authors' recomputeExecutor runs it, over the forward ops of
// any graph (not only chains): walking the forward ops in order, `run += bytes of the op's outputs`; when run exceeds
// the budget B the op becomes a checkpoint (its outputs stay), `x += its bytes`, `y = max(y, run)`, `run = 0`. A pass
// with B = 0 gives x and y, then B = sqrt(x*y) ("search over budget") and a second pass picks the checkpoints. The
// outputs of other forward ops are freed after their last forward read and recomputed on demand in the backward,
// memory-centric (each backward op recomputes what it reads) or speed-centric (recomputed once, kept to the last
// read).
#include "recompute_on_demand.hpp"
#include "sequence.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/views.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>

namespace memsim {
namespace {

struct CheckpointSqrtOptions {
  int segments = 0; // 0: round(sqrt(layers))
  std::string mode = "sqrt";
  std::string recompute_mode = "speed"; // Chen et al. recompute each segment once
};

struct GreedyPass {
  std::vector<bool> checkpoint; // per op
  double x = 0;                 // bytes of the checkpoints
  double y = 0;                 // the largest run of bytes between two checkpoints
};

GreedyPass greedy_checkpoints(const Trace& trace, double budget)
{
  GreedyPass pass;
  pass.checkpoint.assign(trace.ops.size(), false);
  double run = 0;
  for (const Op& op : trace.ops) {
    if (op.phase != Phase::forward)
      continue;
    double bytes = 0;
    for (TensorId out : op.outputs)
      bytes += static_cast<double>(trace.tensor(out).bytes);
    run += bytes;
    if (run > budget) {
      pass.checkpoint[static_cast<std::size_t>(op.id)] = true;
      pass.x += bytes;
      pass.y = std::max(pass.y, run);
      run = 0;
    }
  }
  return pass;
}

Plan plan_checkpoint_budget(const Trace& trace, const PlanRequest& request, const CheckpointSqrtOptions& options)
{
  const GreedyPass first = greedy_checkpoints(trace, 0);
  const double budget = std::sqrt(first.x * first.y);
  const GreedyPass second = greedy_checkpoints(trace, budget);
  std::vector<bool> dropped(trace.ops.size(), false);
  for (const Op& op : trace.ops)
    dropped[static_cast<std::size_t>(op.id)] =
        op.phase == Phase::forward && !second.checkpoint[static_cast<std::size_t>(op.id)];
  const TraceAnalysis analysis(trace);
  Plan plan;
  const planning::SequentialPlan emitted = planning::emit_sequence(
      analysis,
      planning::recompute_on_demand(analysis, dropped, planning::recompute_mode_named(options.recompute_mode)), plan);
  if (emitted.peak_bytes > request.budget_bytes)
    throw Infeasible(fmt::format("checkpoint-sqrt mode=budget (greedy budget {}) needs {} ({} bytes, at op {} '{}'), "
                                 "budget is {} ({} bytes)",
                                 units::format_bytes(budget),
                                 units::format_bytes(static_cast<double>(emitted.peak_bytes)), emitted.peak_bytes,
                                 emitted.peak_op, trace.op(emitted.peak_op).name,
                                 units::format_bytes(static_cast<double>(request.budget_bytes)), request.budget_bytes));
  plan.estimate.peak_bytes = emitted.peak_bytes;
  return plan;
}

Plan plan_checkpoint_sqrt(const Trace& trace, const Machine&, const PlanRequest& request,
                          const CheckpointSqrtOptions& options)
{
  if (options.mode == "budget")
    return plan_checkpoint_budget(trace, request, options);
  const ChainView chain = chain_view(trace);
  const auto layer_count = static_cast<std::int64_t>(chain.layers.size());
  std::int64_t segments = options.segments;
  if (segments <= 0)
    segments = std::max<std::int64_t>(1, std::llround(std::sqrt(static_cast<double>(layer_count))));
  segments = std::min(segments, layer_count);
  const std::int64_t segment_size = (layer_count + segments - 1) / segments;
  auto segment_of = [&](int layer) { return layer / segment_size; };
  const std::int64_t last_segment = segment_of(static_cast<int>(layer_count - 1));

  // Segment inputs stay resident from the forward to the backward, with every other output of the op that produces
  // them (a recorded batch norm also writes its saved mean and inverse std, and in-place add/relu after it leave the
  // norm's output as the layer's output): a recompute would otherwise allocate the resident input a second time.
  const TraceAnalysis analysis(trace);
  std::set<TensorId> kept;
  for (std::int64_t start = segment_size; start < layer_count; start += segment_size) {
    const TensorId input = chain.layers[static_cast<std::size_t>(start - 1)].output_tensor;
    kept.insert(input);
    if (const auto producer = analysis.producer(input))
      for (TensorId out : trace.op(*producer).outputs)
        kept.insert(out);
  }

  std::vector<planning::SequenceEntry> sequence;
  std::vector<bool> recomputed(static_cast<std::size_t>(segments), false);
  for (const Op& op : trace.ops) {
    if (op.phase == Phase::backward) {
      const std::int64_t segment = segment_of(op.layer);
      if (segment != last_segment && !recomputed[static_cast<std::size_t>(segment)]) {
        recomputed[static_cast<std::size_t>(segment)] = true;
        const std::int64_t first = segment * segment_size;
        const std::int64_t end = std::min(first + segment_size, layer_count);
        for (std::int64_t layer = first; layer < end; ++layer) {
          for (OpId id : chain.layers[static_cast<std::size_t>(layer)].forward_ops) {
            const Op& forward = trace.op(id);
            std::size_t kept_outputs = 0;
            for (TensorId out : forward.outputs)
              kept_outputs += kept.count(out);
            if (kept_outputs == forward.outputs.size())
              continue; // its outputs are all still resident
            if (kept_outputs != 0)
              throw Infeasible(fmt::format("checkpoint-sqrt cannot recompute op {} '{}': it produces a kept segment "
                                           "input and other tensors",
                                           forward.id, forward.name));
            sequence.push_back({forward.id, true});
          }
        }
      }
    }
    sequence.push_back({op.id, false});
  }

  Plan plan;
  const planning::SequentialPlan emitted = planning::emit_sequence(analysis, sequence, plan);
  if (emitted.peak_bytes > request.budget_bytes)
    throw Infeasible(fmt::format("checkpoint-sqrt with {} segments needs {} ({} bytes, at op {} '{}'), budget is {} "
                                 "({} bytes)",
                                 segments, units::format_bytes(static_cast<double>(emitted.peak_bytes)),
                                 emitted.peak_bytes, emitted.peak_op, trace.op(emitted.peak_op).name,
                                 units::format_bytes(static_cast<double>(request.budget_bytes)), request.budget_bytes));
  plan.estimate.peak_bytes = emitted.peak_bytes;
  return plan;
}

} // namespace

MEMSIM_REGISTER_PLANNER(
    checkpoint_sqrt, "checkpoint-sqrt",
    "Chen et al. 2016: keep ~sqrt(n) segment inputs of the chain, recompute each segment's forward before its backward",
    {param("segments", &CheckpointSqrtOptions::segments, "number of segments (0: round(sqrt(layers)))",
           {.min = 0, .max = 1e6}),
     param("mode", &CheckpointSqrtOptions::mode,
           "sqrt: equal layer segments of the chain; budget: Chen's greedy over forward ops with budget sqrt(x*y)",
           {.choices = {"sqrt", "budget"}}),
     param("recompute_mode", &CheckpointSqrtOptions::recompute_mode,
           "mode=budget: memory (each backward op recomputes what it reads) or speed (recompute once, keep)",
           {.choices = {"memory", "speed"}})},
    plan_checkpoint_sqrt);

} // namespace memsim
