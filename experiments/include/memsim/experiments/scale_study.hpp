#pragma once
// One capacity study of `memsim max-scale`: a workload whose size follows an axis (a generator's parameter, or a
// recorded trace's batch through `memsim trace rescale`), a planner,
// a machine and a budget. A probe at value v generates the workload with its axis parameter set to v, plans it and
// simulates the plan (fast engine by default); the value trains when a plan exists and runs within the budget (and,
// with a throughput floor, keeps samples/s at or above it; with an overhead limit, keeps its time within that many
// times keep-all's on an unlimited GPU).
#include "memsim/common/params.hpp"
#include "memsim/experiments/capacity_search.hpp"
#include "memsim/hwmodels/fuse.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/traces/trace.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace memsim::experiments {

// models: k copies of the workload fused horizontally (fuse_trace, efficiency model; hwmodels/fuse.hpp).
enum class ScaleAxis { batch, width, depth, models };
std::string_view to_string(ScaleAxis axis);
std::optional<ScaleAxis> scale_axis_from_string(std::string_view text);

struct ScaleStudy {
  // The workload: a generator and its parameters, or a recorded trace that `memsim trace rescale` takes to each
  // batch (the batch axis only).
  std::string generator;                                      // generator kind (`memsim generators`)
  nlohmann::json generator_params = nlohmann::json::object(); // given values; the axis parameter is overridden
  std::shared_ptr<const Trace> recorded;                      // set for a recorded trace (shared: cells copy studies)
  std::string recorded_name;                                  // its file, for messages
  ScaleAxis axis = ScaleAxis::batch;
  // The models axis: how the k copies are fused (fuse_models); `fused_traces` is the recordings' directory (measured).
  FusionModel fusion = FusionModel::efficiency;
  std::filesystem::path fused_traces;
  std::string axis_param; // the generator's parameter the axis sets
  double axis_step = 1;   // the axis value v sets the parameter to v x axis_step (a finer scale than whole numbers)
  std::string planner;
  nlohmann::json planner_params = nlohmann::json::object();
  Machine machine;
  std::uint64_t budget_bytes = 0;          // 0: the GPU's memory
  std::optional<double> min_samples_per_s; // the throughput floor, when asked for
  // The runtime-overhead limit (DTR's and DyNN-Offload's max-batch convention): a value trains only when its time is
  // at most this x keep-all's time on the same workload with unlimited GPU memory (per iteration when the plan runs
  // more iterations than the workload has).
  std::optional<double> max_overhead;
  SimOptions simulation;
  std::function<void(const std::string&)> planner_progress = nullptr; // each probe's PlanRequest::progress
  std::filesystem::path planner_state_dir;                            // each probe's PlanRequest::state_dir
};

// An experiment's `search:` block: what every (workload, planner, budget, bandwidth) cell searches for.
struct SearchSettings {
  ScaleAxis axis = ScaleAxis::batch;
  std::string axis_param; // empty: the axis's default parameter for each workload's generator
  double axis_step = 1;   // see ScaleStudy::axis_step
  CapacitySearchOptions bounds;
  std::optional<double> min_throughput; // fraction of keep-all's samples/s at keep-all's largest batch
  std::optional<double> max_overhead;   // see ScaleStudy::max_overhead
};

// A trace file, or "KIND" or "KIND:k=v,k=v" (e.g. "transformer:layers=24,hidden=1024"), into a study's workload.
// Throws InputError located at `where` for unknown kinds or parameters and malformed values.
void parse_workload_spec(const std::string& text, ScaleStudy& study, const std::string& where = "--workload");

// The generator's parameter an axis sets (an integer one, or a number one used as a whole-number scale):
// `requested` when given (checked), else batch -> batch, depth -> depth or layers, width -> width or hidden. Throws
// InputError naming the candidates when there is none.
std::string resolve_axis_param(const std::string& generator, ScaleAxis axis, const std::string& requested);

// Sets the study's axis and the parameter it moves (resolve_axis_param for a generator; "batch" for a recorded
// trace, which refuses the other axes).
void set_axis(ScaleStudy& study, ScaleAxis axis, const std::string& requested);
// A step other than 1 needs a generator parameter that takes a number (a scale such as `width`), not an integer.
void set_axis_step(ScaleStudy& study, double step);
// The parameter's value at axis value `value`: value x axis_step.
double axis_value(const ScaleStudy& study, std::int64_t value);

// The workload at one value of the axis: generated on the machine's first GPU, or the recorded trace rescaled to
// that batch and to that GPU.
Trace workload_at(const ScaleStudy& study, std::int64_t value);

// Whether a planner fuses the models itself (it declares a `models` parameter: hfta, hfta-capuchin). On the models axis
// such a planner gets the single model and `models = N` instead of the N-model fused trace.
bool planner_fuses_models(const std::string& planner);

// Keep-all on `trace` with every GPU's memory unlimited, the reference of `max_overhead`: its time (every iteration)
// and its number of iterations.
struct KeepAllReference {
  double time_s = 0;
  std::size_t iterations = 1;
};
KeepAllReference unlimited_keep_all(const Trace& trace, const Machine& machine, const SimOptions& simulation);

// Plan + simulate at one value. InputErrors of the generator (a bad value) propagate; no plan, a planner that
// refuses the workload (no chain view) and an infeasible simulation are outcomes.
ProbeOutcome probe_study(const ScaleStudy& study, std::int64_t value);

} // namespace memsim::experiments
