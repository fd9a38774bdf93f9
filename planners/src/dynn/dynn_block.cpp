// dynn-block: DyNN-Offload's execution blocks as a static plan (spec dynn-offload.md §2.6) with oracle knowledge of
// every iteration's graph. Every tensor starts on the host; each iteration is cut into blocks (the DP or a Figure-12
// ablation) and run with double buffering: block j + 1's migration -- evictions (D2H first when the host copy is
// stale and the tensor is used later), then prefetches -- starts when block j starts, and block j + 1's first op
// waits for it. After an iteration's last block every resident tensor is freed (updated weights and moments written
// back first), so the next iteration starts from the host again -- or, with `retain`, what the next iteration's
// first block uses stays resident.
#include "memsim/planners/dynn/problem.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/dynn/blocks.hpp"
#include "memsim/planners/planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace memsim {
namespace {

struct DynnBlockOptions {
  std::string partitioner = "dp";
  int blocks = 0;
  bool grow_blocks = false;
  std::string dp_sets = "conservative";
  bool retain = false;
  double dp_work_limit = 1e9;
};

// The partition of one iteration, and how the DP went: "exact", "conservative" or "greedy" (fallbacks, dp_cost_s is
// under the model named).
dynn::Partition choose_partition(const dynn::BlockIndex& index, const DynnBlockOptions& options, std::string& dp_model,
                                 double& dp_cost_s)
{
  const dynn::DpSets sets = options.dp_sets == "exact" ? dynn::DpSets::exact : dynn::DpSets::conservative;
  const dynn::DpResult dp = dynn::partition_dp(index, options.dp_work_limit, sets);
  dp_model = dp.greedy ? "greedy" : dp.sets == dynn::DpSets::exact ? "exact" : "conservative";
  dp_cost_s = dp.cost_s;
  if (options.partitioner == "dp")
    return dp.partition;
  const std::size_t blocks = options.blocks > 0 ? static_cast<std::size_t>(options.blocks) : dp.partition.size();
  const dynn::EqualBy by = options.partitioner == "equal-ops"    ? dynn::EqualBy::ops
                           : options.partitioner == "equal-time" ? dynn::EqualBy::time
                                                                 : dynn::EqualBy::bytes;
  dynn::Partition partition;
  if (options.grow_blocks) {
    std::optional<dynn::Partition> fitting = dynn::partition_equal_fitting(index, by, blocks);
    if (!fitting) // unreachable while the DP above succeeds: one op per block fits then
      throw Infeasible(fmt::format("dynn-block: no {} split of {} ops fits one buffer ({} bytes) per block",
                                   options.partitioner, index.op_count(), index.problem().capacity));
    partition = std::move(*fitting);
  } else {
    partition = dynn::partition_equal(index, by, blocks);
    if (!dynn::partition_fits(index, partition))
      throw Infeasible(fmt::format("dynn-block: {} with {} blocks puts more than one buffer ({} bytes) in a block",
                                   options.partitioner, partition.size(), index.problem().capacity));
  }
  dp_cost_s = dynn::dp_cost(index, partition, dp.sets);
  return partition;
}

// Steps of one iteration's schedule, with the deps of spec §1.7: a migration starts when the block before its
// block starts (the previous migration has ended and the block two back has finished), evicts before it
// prefetches, and its block's first op waits for it.
class Emitter {
public:
  Emitter(Plan& plan, const dynn::IterationProblem& iteration) : builder_(plan), plan_(&plan), it_(&iteration) {}

  std::vector<StepId> emit(const dynn::Schedule& schedule, std::vector<StepId> start_after)
  {
    std::vector<StepId> migration_done = start_after; // the previous migration has ended
    std::optional<StepId> last_compute_two_back;      // last op of block j - 2
    std::optional<StepId> last_compute;               // last op of block j - 1
    for (const dynn::BlockSchedule& block : schedule.blocks) {
      std::vector<StepId> trigger = migration_done;
      if (last_compute_two_back)
        trigger.push_back(*last_compute_two_back);
      migration_done = migrate(block.evict, block.write_back, block.prefetch, trigger);
      std::vector<StepId> deps = migration_done;
      for (std::size_t i = block.begin; i < block.end; ++i) {
        tag(builder_.compute(it_->ops[i], i == block.begin ? deps : std::vector<StepId>{}));
        if (i + 1 == block.end) {
          last_compute_two_back = last_compute;
          last_compute = builder_.last();
        }
      }
    }
    std::vector<StepId> flush_after = migration_done;
    if (last_compute)
      flush_after.push_back(*last_compute);
    return migrate(schedule.flush_free, schedule.flush_write_back, {}, flush_after);
  }

private:
  void tag(StepId step) { plan_->steps[static_cast<std::size_t>(step)].iteration = it_->iteration; }

  std::vector<StepId> migrate(const std::vector<std::uint32_t>& evict, const std::vector<std::uint32_t>& write_back,
                              const std::vector<std::uint32_t>& prefetch, const std::vector<StepId>& trigger)
  {
    std::optional<StepId> last;
    auto first_deps = [&] { return last ? std::vector<StepId>{*last} : trigger; };
    for (std::uint32_t t : evict) {
      const TensorId tensor = it_->tensors[t];
      if (std::find(write_back.begin(), write_back.end(), t) != write_back.end()) {
        tag(builder_.offload(tensor, first_deps()));
        last = builder_.last();
      }
      tag(builder_.free(tensor, first_deps(), "d2h"));
      last = builder_.last();
    }
    for (std::uint32_t t : prefetch) {
      tag(builder_.prefetch(it_->tensors[t], first_deps()));
      last = builder_.last();
    }
    return last ? std::vector<StepId>{*last} : trigger;
  }

  PlanBuilder builder_;
  Plan* plan_;
  const dynn::IterationProblem* it_;
};

Plan plan_dynn_block(const Trace& trace, const Machine& machine, const PlanRequest& request,
                     const DynnBlockOptions& options)
{
  Plan plan;
  for (TensorKind kind : {TensorKind::input, TensorKind::weight, TensorKind::optimizer_state})
    plan.initial_placement.push_back(PlacementRule{kind, std::nullopt, Placement::host, std::nullopt});
  nlohmann::json block_ends = nlohmann::json::array();
  nlohmann::json dp_costs = nlohmann::json::array();
  nlohmann::json longest = nlohmann::json::array();
  nlohmann::json dp_models = nlohmann::json::array();
  double total_s = 0;
  std::uint64_t h2d = 0;
  std::uint64_t d2h = 0;
  const std::vector<dynn::IterationProblem> iterations =
      dynn::iteration_problems(trace, machine, request.budget_bytes / 2);
  std::vector<dynn::BlockIndex> indices;
  std::vector<dynn::Partition> partitions;
  for (const dynn::IterationProblem& iteration : iterations) {
    const dynn::BlockIndex& index = indices.emplace_back(iteration.problem);
    std::string dp_model;
    double dp_cost_s = 0;
    partitions.push_back(choose_partition(index, options, dp_model, dp_cost_s));
    dp_models.push_back(dp_model);
    block_ends.push_back(partitions.back());
    dp_costs.push_back(dp_cost_s);
    longest.push_back(index.longest_block());
  }

  std::vector<StepId> after;
  std::vector<TensorId> kept;       // by trace id, from the iteration before
  std::vector<TensorId> kept_stale; // of them, those whose host copy is stale
  for (std::size_t k = 0; k < iterations.size(); ++k) {
    const dynn::IterationProblem& iteration = iterations[k];
    dynn::ScheduleBoundary boundary;
    auto local_of = [](const dynn::IterationProblem& it, TensorId id) -> std::optional<std::uint32_t> {
      auto found = std::find(it.tensors.begin(), it.tensors.end(), id);
      if (found == it.tensors.end())
        return std::nullopt;
      return static_cast<std::uint32_t>(found - it.tensors.begin());
    };
    for (TensorId id : kept)
      boundary.resident_at_start.push_back(*local_of(iteration, id));
    for (TensorId id : kept_stale)
      boundary.stale_at_start.push_back(*local_of(iteration, id));
    if (options.retain && k + 1 < iterations.size()) {
      // Keep what the next iteration's first block uses (it fits: that block's working set fits a buffer).
      const dynn::IterationProblem& next = iterations[k + 1];
      boundary.keep.assign(iteration.tensors.size(), 0);
      for (std::size_t i = 0; i < partitions[k + 1].front(); ++i)
        for (std::uint32_t t : next.problem.ops[i].tensors)
          if (auto here = local_of(iteration, next.tensors[t]))
            boundary.keep[*here] = 1;
    }
    const dynn::Schedule schedule = dynn::schedule_blocks(indices[k], partitions[k], boundary);
    after = Emitter(plan, iteration).emit(schedule, after);
    kept.clear();
    kept_stale.clear();
    for (std::uint32_t t : schedule.kept)
      kept.push_back(iteration.tensors[t]);
    for (std::uint32_t t : schedule.kept_stale)
      kept_stale.push_back(iteration.tensors[t]);
    total_s += schedule.end_s;
    h2d += schedule.h2d_bytes;
    d2h += schedule.d2h_bytes;
  }
  plan.estimate.iteration_time_s = total_s;
  plan.params["partition"] = {{"block_ends", block_ends}, {"dp_model", dp_models},   {"dp_cost_s", dp_costs},
                              {"longest_block", longest}, {"model_time_s", total_s}, {"h2d_bytes", h2d},
                              {"d2h_bytes", d2h}};
  return plan;
}

} // namespace

MEMSIM_REGISTER_PLANNER(
    dynn_block, "dynn-block",
    "DyNN-Offload's execution blocks with oracle graphs: all tensors start on the host; per iteration, blocks "
    "double-buffered in budget/2 halves, each block's migration (evict, then prefetch) overlapping the block before",
    {param("partitioner", &DynnBlockOptions::partitioner,
           "dp: minimize the last block's finish (spec §2.6); equal-ops/equal-time/equal-bytes: Figure 12's "
           "ablations with `blocks` blocks",
           {.choices = {"dp", "equal-ops", "equal-time", "equal-bytes"}}),
     param("blocks", &DynnBlockOptions::blocks, "blocks per iteration for the equal-* partitioners (0: the DP's count)",
           {.min = 0, .max = 1e6}),
     param("grow_blocks", &DynnBlockOptions::grow_blocks,
           "equal-*: when `blocks` equal blocks put more than one buffer in some block, use the fewest more blocks "
           "that fit (the paper's ablation keeps the count; without this such an iteration is infeasible)"),
     param("dp_sets", &DynnBlockOptions::dp_sets,
           "the DP's migration sets: conservative (spec §2.6: prefetch W_j minus W_j-1 only, over block pairs, "
           "O(n L^2)) or exact (the runtime's sets given the two blocks before, over triples, O(n L^3))",
           {.choices = {"conservative", "exact"}}),
     param("retain", &DynnBlockOptions::retain,
           "keep resident across an iteration boundary what the next iteration's first block uses (spec §4 A14: "
           "weights need not go to the host and back) instead of freeing everything"),
     param("dp_work_limit", &DynnBlockOptions::dp_work_limit,
           "above this much DP work (n L^3 for exact, n L^2 for conservative; L: the longest feasible block) exact "
           "falls back to conservative, conservative to greedy maximal blocks",
           {.min = 1})},
    plan_dynn_block);

} // namespace memsim
