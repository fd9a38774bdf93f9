#pragma once
// The Experiment document (`memsim-experiment`, YAML) and its sweep grid: workloads x planners x budgets x
// bandwidths, one cell per combination in that (stable) order. Each cell is a self-contained JSON document
// that a worker process executes (the SimGrid engine is one per process).
#include "memsim/experiments/scale_study.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/timeline.hpp"
#include "memsim/traces/trace.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace memsim::experiments {

struct Workload {
  std::string name;
  std::filesystem::path trace_file; // absolute; for generated workloads set by materialize_workloads
  nlohmann::json generator;         // {kind: ..., params...} for generated workloads; null otherwise
  Trace trace;
  std::uint64_t default_peak_bytes = 0; // keep-all under the default schedule: the base of fraction_of_peak
  std::string where;                    // "exp.yaml:7:5" for messages
  // Set by a `sweep.batch` axis: this is workload `base` (as the file names it) at this batch, named "<base>-b<batch>".
  std::string base;
  std::optional<std::int64_t> batch;
  // Set by a `sweep.models` axis: `models` copies of workload `base` fused horizontally (fuse_trace, efficiency model),
  // named "<base>-k<models>" (after the batch suffix when both axes are swept).
  std::optional<std::int64_t> models;
  // With `models`: the single model (fuse_trace at k = 1), named "<base>-k1", for planners that fuse it themselves
  // (those declaring a `models` parameter: hfta, hfta-capuchin); written next to the fused trace by
  // materialize_workloads.
  std::string single_model_name;
  std::optional<Trace> single_model;
  std::filesystem::path single_model_file;
};

struct PlannerChoice {
  std::string label;         // the `planner` column: the label, or the planner's name
  std::string name;          // registry name
  nlohmann::json params;     // validated and completed with defaults
  bool fusion_given = false; // the experiment set its `fusion`: a models axis's sweep.fusion does not replace it
};

// One value of the budget axis: absolute bytes, or a fraction of each workload's default-schedule peak.
struct BudgetChoice {
  std::optional<std::uint64_t> bytes;
  std::optional<double> fraction_of_peak;
};

inline constexpr const char* kPlotTimeVsBudget = "time_vs_budget";
inline constexpr const char* kPlotPeakVsBudget = "peak_vs_budget";
inline constexpr const char* kPlotThroughputVsBatch = "throughput_vs_batch"; // samples/s per planner (sweep.batch)
std::vector<std::string> known_plots();

struct Experiment {
  std::filesystem::path source; // the YAML file
  std::string name;
  std::vector<Workload> workloads;
  std::filesystem::path machine_file; // absolute path of the machine YAML (preset or file)
  Machine machine;
  std::string machine_hash; // of the machine file's bytes: part of every cell's key
  std::vector<PlannerChoice> planners;
  std::vector<BudgetChoice> budgets; // never empty (absent in YAML: the GPU's memory)
  std::vector<double> bandwidths;    // empty: the machine's own host links
  std::vector<std::int64_t> batches; // sweep.batch: workloads were expanded to one per batch
  std::vector<std::int64_t> models;  // sweep.models: then to one per number of fused models
  std::vector<std::string> plots;
  unsigned jobs = 0;     // 0: the core count
  SimOptions simulation; // `engine:` and `allocator:`; the defaults (simgrid, bytes) when absent
  // `search:`: each cell searches for the largest value of an axis that trains (capacity.csv) instead of
  // simulating one point (results.csv). Workloads are then generator specs and budgets absolute.
  std::optional<SearchSettings> search;
};

// Loads and validates everything (planner names and params, machine, traces or generators).
// Errors are InputError located at "file:line:col" of the offending key or value.
Experiment load_experiment(const std::filesystem::path& path, const std::filesystem::path& presets_dir);

// The workload part of a ScaleStudy: the generator and the parameters the file gave, or the recorded trace (shared:
// `recorded` when the caller has one, else a copy of the workload's).
void set_study_workload(ScaleStudy& study, const Workload& workload, std::shared_ptr<const Trace> recorded = nullptr);

// Writes generated workloads' traces to out_dir/workloads/<name>.trace.json and points trace_file at them.
void materialize_workloads(Experiment& experiment, const std::filesystem::path& out_dir);

// One point of the sweep grid: everything a worker needs, by value or by file.
struct Cell {
  std::size_t index = 0; // position in the stable order (not part of the key)
  std::string workload;
  std::filesystem::path trace_file;
  std::string trace_hash;
  std::string machine;
  std::filesystem::path machine_file;
  std::string machine_hash;
  std::string planner_label;
  std::string planner;
  nlohmann::json params = nlohmann::json::object();
  std::uint64_t budget_bytes = 0;
  std::optional<double> budget_fraction;    // set when the budget is a fraction of the default peak
  std::optional<double> bandwidth_override; // host-link bandwidth set by the sweep
  double bandwidth_bytes_per_s = 0;         // the override, or the machine's own gpu0<->host bottleneck
  std::string base_workload;                // with `batch` or `models`: set by those axes (Workload::base)
  std::optional<std::int64_t> batch;
  std::optional<std::int64_t> models;
  // A models cell whose planner declares a `models` parameter plans and simulates the single model (its params get
  // models = N); the fused trace still gives ideal_time_s and excess_peak_ratio.
  std::filesystem::path single_model_file;
  std::string single_model_hash;
  EngineKind engine = EngineKind::simgrid;
  AllocatorKind allocator = AllocatorKind::bytes;
};

// The sweep grid in its stable order: workloads x planners x budgets x host-link bandwidths (nullopt: the machine's
// own, when the sweep sets none). Simulation cells and capacity searches both expand it.
struct GridPoint {
  const Workload& workload;
  const PlannerChoice& planner;
  const BudgetChoice& budget;
  std::optional<double> bandwidth;
};
void for_each_grid_point(const Experiment& experiment, const std::function<void(const GridPoint&)>& visit);

std::vector<Cell> expand_cells(const Experiment& experiment);

nlohmann::json cell_to_json(const Cell& cell);
Cell cell_from_json(const nlohmann::json& document, const std::string& source_name);
// A stable 16-hex-digit hash of the cell's content (paths and index excluded; file contents included).
std::string cell_key(const Cell& cell);
// "resnet keep-all 0.5xpeak(3.20GiB) 12GB/s": for progress lines and failure messages.
std::string describe_cell(const Cell& cell);

struct CellResult {
  bool feasible = true;
  std::string stage;  // when infeasible: "plan" (no plan fits) or "simulate" (OOM, non-resident input)
  std::string reason; // when infeasible
  double ideal_time_s = 0;
  Metrics metrics;
  // The keep-all (default schedule) peak of the cell's configuration over the GPU's memory (μ-TWO's Fig. 9d: how far
  // it is over the GPU before any memory optimization): the plan's `keep_all_peak_bytes` when its planner records
  // one (hfta's largest subset, hfta-capuchin's N fused, mu-two's chosen sub-arrays), else the workload's.
  double excess_peak_ratio = 0;
  // The plan's `partition` parameter when its planner records one (hfta, hfta-capuchin, mu-two), else "".
  std::string partition;
};

// The worker's job: make_plan + simulate. Creates the process's SimGrid engine: once per process only.
// `planner_state_dir`: PlanRequest::state_dir (a long planner search resumes there; empty: none).
CellResult run_cell(const Cell& cell, const std::filesystem::path& planner_state_dir = {});

nlohmann::json cell_result_to_json(const Cell& cell, const CellResult& result);
CellResult cell_result_from_json(const nlohmann::json& document, const std::string& source_name);

// results.csv: the appendix columns first, then extras; numbers formatted deterministically.
// The iteration columns (iterations, steady_iteration_time_s, iteration_times_s as a ';'-separated list) are
// written only when some cell ran more than one iteration, so single-iteration experiments keep their columns.
// `batches` adds base_workload, batch; `models` (a sweep.models axis) adds base_workload (unless batches did),
// models, partition, recompute_fraction, swap_overlap_fraction, excess_peak_ratio and gpu_hours_10k (one GPU's hours
// for 10,000 steady iterations), and makes samples_per_s count every model's samples.
bool has_several_iterations(const std::vector<CellResult>& results);
// `iterations`: the per-iteration columns; `batches`: base_workload and batch (a sweep.batch axis).
std::string csv_header(bool iterations = false, bool batches = false, bool models = false);
std::string csv_row(const Cell& cell, const CellResult& result, bool iterations = false, bool batches = false,
                    bool models = false);
// Shortest round-trip decimal form; integral values without exponent or fraction ("12000000000").
std::string format_number(double value);

} // namespace memsim::experiments
