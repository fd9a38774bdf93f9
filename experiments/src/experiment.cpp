#include "memsim/experiments/experiment.hpp"
#include "memsim/experiments/capacity_experiment.hpp"

#include "memsim/common/files.hpp"
#include "memsim/common/stable_hash.hpp"
#include "memsim/experiments/processes.hpp"
#include "memsim/experiments/scale_study.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/json_io.hpp"
#include "memsim/common/units.hpp"
#include "memsim/common/yaml_io.hpp"
#include "memsim/hwmodels/cost_model.hpp"
#include "memsim/hwmodels/roofline.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/views.hpp"

#include "memsim/traces/generator_registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>

namespace memsim::experiments {
namespace {

using Json = nlohmann::json;

constexpr int kCellFormat = 1;

std::string join(const std::vector<std::string>& names)
{
  std::string joined;
  for (const auto& name : names)
    joined += (joined.empty() ? "" : ", ") + name;
  return joined;
}

// Paths in the experiment file are relative to the file's folder.
std::filesystem::path resolve_relative(const std::filesystem::path& experiment_file, const std::string& text)
{
  std::filesystem::path path(text);
  if (path.is_relative())
    path = experiment_file.parent_path() / path;
  return std::filesystem::absolute(path).lexically_normal();
}

bool looks_like_path(const std::string& text)
{
  return text.find('/') != std::string::npos || text.ends_with(".yaml") || text.ends_with(".yml");
}

// A YAML scalar converted to the JSON type the planner declares for that parameter.
Json param_value(const yaml_io::Node& node, const ParamSpec* spec)
{
  if (spec == nullptr)
    return node.as_string(); // unknown: complete_params names the valid ones
  switch (spec->type) {
  case ParamType::integer: return node.as_int();
  case ParamType::number: return node.as_number();
  case ParamType::boolean: return node.as_bool();
  case ParamType::string: return node.as_string();
  }
  return node.as_string();
}

// One parameter of a component from the experiment file, typed and checked on its own so that a message points at it.
template <class Entry>
Json checked_param(const Registry<Entry>& registry, const Entry& entry, const std::string& key,
                   const yaml_io::Node& value_node)
{
  const ParamSpec* spec = nullptr;
  for (const ParamSpec& candidate : entry.params)
    if (candidate.name == key)
      spec = &candidate;
  Json one = Json::object();
  one[key] = param_value(value_node, spec);
  try {
    (void)registry.complete_params(entry, one);
  } catch (const InputError& error) {
    value_node.fail(error.message());
  }
  return one[key];
}

PlannerChoice load_planner(const yaml_io::Node& node)
{
  // yaml_io::Node is never assigned to: YAML::Node assignment rewrites the document node it refers to.
  PlannerChoice choice;
  std::optional<yaml_io::Node> params_node;
  std::optional<yaml_io::Node> name_node;
  if (node.is_scalar()) {
    name_node.emplace(node);
  } else {
    node.only_keys({"name", "label", "params"});
    name_node.emplace(node.at("name"));
    if (node.has("label"))
      choice.label = node.at("label").as_string();
    if (node.has("params"))
      params_node.emplace(node.at("params"));
  }
  choice.name = name_node->as_string();
  if (choice.label.empty())
    choice.label = choice.name;

  const PlannerRegistry& registry = planner_registry();
  const PlannerInfo* info = nullptr;
  try {
    info = &registry.get(choice.name);
  } catch (const InputError& error) {
    name_node->fail(error.message());
  }
  Json given = Json::object();
  if (params_node)
    for (const auto& [key, value_node] : params_node->entries())
      given[key] = checked_param(registry, *info, key, value_node);
  choice.fusion_given = given.contains("fusion");
  try {
    choice.params = registry.complete_params(*info, given);
  } catch (const InputError& error) {
    (params_node ? *params_node : node).fail(error.message());
  }
  return choice;
}

// A generator spec {kind: cnn|transformer, ...} -> an analytic trace timed by the roofline of the machine's gpu0.
// `generator` records the keys the spec gave (not the defaults), as cells have always named them.
Trace generate_workload(const yaml_io::Node& spec, const Machine& machine, Json& generator)
{
  spec.expect_map();
  const yaml_io::Node kind_node = spec.at("kind");
  const std::string kind = kind_node.as_string();
  const GeneratorRegistry& registry = generator_registry();
  const GeneratorInfo* info = registry.find(kind);
  if (info == nullptr)
    kind_node.fail(fmt::format("unknown generator kind '{}' (valid: {})", kind, registry.names()));
  std::vector<std::string> keys{"kind"};
  for (const ParamSpec& p : info->params)
    keys.push_back(p.name);
  spec.only_keys(keys);
  generator = Json{{"kind", kind}};
  for (const auto& [key, value_node] : spec.entries())
    if (key != "kind")
      generator[key] = checked_param(registry, *info, key, value_node);
  Json given = generator;
  given.erase("kind");
  const ParamValues values = registry.complete_params(*info, given);

  const Gpu& gpu = machine.gpus.at(0);
  auto roofline_for = [&](const std::string& dtype) {
    std::optional<Roofline> roofline = roofline_of(gpu, dtype);
    if (!roofline)
      (spec.has("dtype") ? spec.at("dtype") : spec)
          .fail(fmt::format("GPU '{}' of machine '{}' has no peak_flops for {}", gpu.name, machine.name, dtype));
    return *roofline;
  };
  try {
    return info->make(values, roofline_for);
  } catch (const InputError& error) {
    // The generators name a bad parameter as "--flag": point at that key of the spec instead.
    if (!error.where().empty() && !error.where().starts_with("--"))
      throw; // already located in the experiment file
    std::string key = error.where().empty() ? "" : error.where().substr(2);
    for (const ParamSpec& p : info->params)
      if (command_line_flag(p) == error.where())
        key = p.name;
    if (!key.empty() && spec.has(key.c_str()))
      spec.at(key.c_str()).fail(error.message());
    spec.fail(key.empty() ? error.message() : fmt::format("{}: {}", key, error.message()));
  }
}

Workload load_workload(const yaml_io::Node& node, const std::filesystem::path& experiment_file, const Machine& machine)
{
  node.only_keys({"name", "trace", "generate"});
  Workload workload;
  workload.where = node.where();
  workload.name = node.at("name").as_string();
  if (workload.name.empty())
    node.at("name").fail("a workload name must not be empty");
  if (node.has("trace") == node.has("generate"))
    node.fail("a workload needs exactly one of 'trace' (a file) or 'generate' (a generator spec)");
  if (node.has("trace")) {
    yaml_io::Node trace_node = node.at("trace");
    std::string text = trace_node.as_string();
    std::filesystem::path path = resolve_relative(experiment_file, text);
    if (!std::filesystem::is_regular_file(path))
      trace_node.fail(fmt::format("no such trace file '{}' (looked for {})", text, path.string()));
    workload.trace_file = path;
    workload.trace = load_trace(path);
  } else {
    workload.trace = generate_workload(node.at("generate"), machine, workload.generator);
  }
  workload.default_peak_bytes = default_memory_profile(workload.trace).peak_bytes;
  return workload;
}

std::string resolve_machine(const yaml_io::Node& node, const std::filesystem::path& experiment_file,
                            const std::filesystem::path& presets_dir, std::filesystem::path& machine_file)
{
  std::string text = node.as_string();
  if (looks_like_path(text)) {
    machine_file = resolve_relative(experiment_file, text);
    if (!std::filesystem::is_regular_file(machine_file))
      node.fail(fmt::format("no such machine file '{}' (looked for {})", text, machine_file.string()));
    return text;
  }
  machine_file = presets_dir / (text + ".yaml");
  if (!std::filesystem::is_regular_file(machine_file)) {
    try {
      load_machine_or_preset(text, presets_dir); // its message lists the presets
    } catch (const InputError& error) {
      node.fail(error.message());
    }
  }
  machine_file = std::filesystem::absolute(machine_file).lexically_normal();
  return text;
}

std::vector<BudgetChoice> load_budgets(const yaml_io::Node& node)
{
  std::vector<BudgetChoice> budgets;
  if (node.is_sequence()) {
    if (node.size() == 0)
      node.fail("the budget axis needs at least one value");
    std::set<std::uint64_t> seen;
    for (std::size_t i = 0; i < node.size(); ++i) {
      yaml_io::Node item = node.item(i);
      std::uint64_t bytes = item.as_bytes();
      if (bytes == 0)
        item.fail("a budget must be positive");
      if (!seen.insert(bytes).second)
        item.fail(fmt::format("duplicate budget '{}'", item.as_string()));
      budgets.push_back(BudgetChoice{bytes, std::nullopt});
    }
    return budgets;
  }
  if (!node.is_map())
    node.fail("expected a list of sizes (e.g. [8GiB, 12GiB]) or {fraction_of_peak: [1.0, 0.5]}");
  node.only_keys({"fraction_of_peak"});
  yaml_io::Node fractions = node.at("fraction_of_peak");
  if (fractions.size() == 0)
    fractions.fail("the budget axis needs at least one value");
  std::set<double> seen;
  for (std::size_t i = 0; i < fractions.size(); ++i) {
    yaml_io::Node item = fractions.item(i);
    double fraction = item.as_number();
    if (!(fraction > 0) || !std::isfinite(fraction))
      item.fail(fmt::format("a fraction of the peak must be positive, found '{}'", item.as_string()));
    if (!seen.insert(fraction).second)
      item.fail(fmt::format("duplicate fraction '{}'", item.as_string()));
    budgets.push_back(BudgetChoice{std::nullopt, fraction});
  }
  return budgets;
}

std::vector<double> load_bandwidths(const yaml_io::Node& node)
{
  std::vector<double> bandwidths;
  if (node.size() == 0)
    node.fail("the bandwidth axis needs at least one value (leave it out to use the machine's own)");
  std::set<double> seen;
  for (std::size_t i = 0; i < node.size(); ++i) {
    yaml_io::Node item = node.item(i);
    double bandwidth = item.as_bandwidth();
    if (!seen.insert(bandwidth).second)
      item.fail(fmt::format("duplicate bandwidth '{}'", item.as_string()));
    bandwidths.push_back(bandwidth);
  }
  return bandwidths;
}

// The values of a sweep axis of positive integers (sweep.batch, sweep.models): at least one, each in [1, max],
// no duplicates.
std::vector<std::int64_t> load_axis_values(const yaml_io::Node& node, const std::string& axis,
                                           const std::string& one_value, std::int64_t max)
{
  if (node.size() == 0)
    node.fail(fmt::format("the {} axis needs at least one value", axis));
  std::vector<std::int64_t> values;
  std::set<std::int64_t> seen;
  for (std::size_t i = 0; i < node.size(); ++i) {
    yaml_io::Node item = node.item(i);
    const std::int64_t value = item.as_int();
    if (value < 1 || value > max)
      item.fail(fmt::format("{} must be between 1 and {}, found {}", one_value, max, value));
    if (!seen.insert(value).second)
      item.fail(fmt::format("duplicate {} {}", axis, value));
    values.push_back(value);
  }
  return values;
}

// The planners that fuse the single model themselves (hfta, hfta-capuchin, mu-two) fuse as the models axis does,
// unless the experiment gave them their own `fusion`; measured recordings are files they cannot read.
void fuse_planners_alike(std::vector<PlannerChoice>& planners, const yaml_io::Node& fusion_node)
{
  const std::string fusion = fusion_node.as_string();
  for (PlannerChoice& choice : planners) {
    const PlannerInfo& info = planner_registry().get(choice.name);
    const bool fuses = std::any_of(info.params.begin(), info.params.end(),
                                   [](const ParamSpec& spec) { return spec.name == "fusion"; });
    if (!fuses || choice.fusion_given)
      continue;
    if (parse_fusion_model(fusion) == FusionModel::measured)
      fusion_node.fail(fmt::format("planner '{}' fuses the models itself and cannot read recorded fused traces; give "
                                   "it params: {{fusion: efficiency}} or {{fusion: batch-proxy}}",
                                   choice.label));
    choice.params["fusion"] = fusion;
  }
}

// How a models axis fuses: sweep.fusion (`memsim gen fuse --fusion`) and, for measured, sweep.fused_traces (the
// recordings' directory, relative to the experiment file).
struct AxisFusion {
  FusionModel model = FusionModel::efficiency;
  std::filesystem::path fused_traces;
};

AxisFusion load_axis_fusion(const yaml_io::Node& sweep, const std::filesystem::path& experiment_file)
{
  AxisFusion fusion;
  if (!sweep.has("models")) {
    for (const char* key : {"fusion", "fused_traces"})
      if (sweep.has(key))
        sweep.at(key).fail(fmt::format("'{}' says how a models axis fuses: it needs sweep.models", key));
    return fusion;
  }
  if (sweep.has("fusion")) {
    const yaml_io::Node node = sweep.at("fusion");
    try {
      fusion.model = parse_fusion_model(node.as_string());
    } catch (const InputError& error) {
      node.fail(error.message());
    }
  }
  const bool measured = fusion.model == FusionModel::measured;
  if (sweep.has("fused_traces") != measured)
    (measured ? sweep.at("models") : sweep.at("fused_traces"))
        .fail(measured ? "fusion: measured needs fused_traces: the directory of recorded fused traces"
                       : "fused_traces is read only with fusion: measured");
  if (measured)
    fusion.fused_traces = resolve_relative(experiment_file, sweep.at("fused_traces").as_string());
  return fusion;
}

// Each workload at each value of a batch or models axis, as a capacity search's probe makes it (workload_at): for
// batch, a generator's `batch` parameter set or a recorded trace rescaled through the cost model (memsim trace
// rescale), named "<name>-b<batch>"; for models, the workload fused k times (fuse_models under `fusion`), named
// "<name>-k<k>". The rescaled, fused and generated traces are written to OUT/workloads by materialize_workloads.
std::vector<Workload> workloads_along(const std::vector<Workload>& workloads, ScaleAxis axis,
                                      const std::vector<std::int64_t>& values, const Machine& machine,
                                      const AxisFusion& fusion = {})
{
  const bool batch_axis = axis == ScaleAxis::batch;
  std::vector<Workload> expanded;
  for (const Workload& workload : workloads) {
    ScaleStudy study;
    study.machine = machine;
    study.fusion = fusion.model;
    study.fused_traces = fusion.fused_traces;
    set_study_workload(study, workload);
    for (std::int64_t value : values) {
      Workload at = workload;
      at.name = fmt::format("{}-{}{}", workload.name, batch_axis ? "b" : "k", value);
      at.trace_file.clear();
      at.base = workload.base.empty() ? workload.name : workload.base;
      (batch_axis ? at.batch : at.models) = value;
      try {
        set_axis(study, axis, "");
        at.trace = workload_at(study, value);
        if (!batch_axis) {
          at.single_model_name = fmt::format("{}-k1", workload.name);
          at.single_model = workload_at(study, 1);
        }
      } catch (const InputError& error) {
        throw InputError(workload.where, fmt::format("workload '{}' at {} {}: {}", workload.name, to_string(axis),
                                                     value, error.message()));
      }
      // A generator describes the batch-scaled workload; a fused one is only its trace.
      if (batch_axis && !workload.generator.is_null())
        at.generator["batch"] = value;
      else
        at.generator = nullptr;
      at.default_peak_bytes = default_memory_profile(at.trace).peak_bytes;
      expanded.push_back(std::move(at));
    }
  }
  return expanded;
}

// The bottleneck of gpu0's path to the host: the bandwidth a cell has when the sweep does not set it.
double own_host_bandwidth(const Machine& machine)
{
  const double bandwidth = machine.host_link_bandwidth(0);
  return std::isfinite(bandwidth) ? bandwidth : 0;
}

Json key_json(const Cell& cell)
{
  Json key = cell_to_json(cell);
  key.erase("index");
  key.erase("trace_file");
  key.erase("machine_file");
  key.erase("single_model_file");
  return key;
}

Json optional_number(const std::optional<double>& value) { return value ? Json(*value) : Json(nullptr); }

} // namespace

std::vector<std::string> known_plots()
{
  // overhead_*: iteration time over the ideal time, minus one (the chain planners' paper, issue 4)
  return {kPlotTimeVsBudget, kPlotPeakVsBudget, "overhead_vs_budget", "overhead_vs_bandwidth", kPlotThroughputVsBatch};
}

Experiment load_experiment(const std::filesystem::path& path, const std::filesystem::path& presets_dir)
{
  yaml_io::Node root(yaml_io::read_file(path), path.string());
  root.expect_format("memsim-experiment", 1);
  root.only_keys({"format", "version", "name", "description", "workloads", "machine", "planners", "sweep", "outputs",
                  "parallelism", "engine", "allocator", "search"});
  Experiment experiment;
  experiment.source = path;
  experiment.name = root.at("name").as_string();

  // The machine first: a budget defaults to its GPU memory.
  resolve_machine(root.at("machine"), path, presets_dir, experiment.machine_file);
  experiment.machine = load_machine(experiment.machine_file);
  experiment.machine_hash = stable_hash(read_text_file(experiment.machine_file));

  yaml_io::Node workloads = root.at("workloads");
  if (workloads.size() == 0)
    workloads.fail("an experiment needs at least one workload");
  std::set<std::string> workload_names;
  for (std::size_t i = 0; i < workloads.size(); ++i) {
    yaml_io::Node item = workloads.item(i);
    item.expect_map();
    if (item.has("name") && !workload_names.insert(item.at("name").as_string()).second)
      item.at("name").fail(fmt::format("duplicate workload name '{}'", item.at("name").as_string()));
    experiment.workloads.push_back(load_workload(item, path, experiment.machine));
  }

  yaml_io::Node planners = root.at("planners");
  if (planners.size() == 0)
    planners.fail("an experiment needs at least one planner");
  std::set<std::string> labels;
  for (std::size_t i = 0; i < planners.size(); ++i) {
    yaml_io::Node item = planners.item(i);
    PlannerChoice choice = load_planner(item);
    if (!labels.insert(choice.label).second)
      item.fail(fmt::format("duplicate planner '{}' (give one of them a different 'label')", choice.label));
    experiment.planners.push_back(std::move(choice));
  }

  if (root.has("sweep")) {
    yaml_io::Node sweep = root.at("sweep");
    sweep.only_keys({"budget", "bandwidth", "batch", "models", "fusion", "fused_traces"});
    const AxisFusion fusion = load_axis_fusion(sweep, path);
    if (sweep.has("budget"))
      experiment.budgets = load_budgets(sweep.at("budget"));
    if (sweep.has("bandwidth"))
      experiment.bandwidths = load_bandwidths(sweep.at("bandwidth"));
    if (sweep.has("batch")) {
      if (root.has("search"))
        sweep.at("batch").fail("a search experiment searches its own axis: it cannot also sweep the batch");
      experiment.batches = load_axis_values(sweep.at("batch"), "batch", "a batch", std::numeric_limits<int>::max());
      experiment.workloads =
          workloads_along(experiment.workloads, ScaleAxis::batch, experiment.batches, experiment.machine);
    }
    if (sweep.has("models")) {
      if (root.has("search"))
        sweep.at("models").fail("a search experiment searches its own axis: it cannot also sweep the models");
      experiment.models =
          load_axis_values(sweep.at("models"), "models", "a number of models", std::numeric_limits<int>::max());
      if (sweep.has("fusion"))
        fuse_planners_alike(experiment.planners, sweep.at("fusion"));
      experiment.workloads =
          workloads_along(experiment.workloads, ScaleAxis::models, experiment.models, experiment.machine, fusion);
    }
  }
  if (experiment.budgets.empty())
    experiment.budgets.push_back(BudgetChoice{experiment.machine.gpus.at(0).memory, std::nullopt});

  experiment.plots = {kPlotTimeVsBudget, kPlotPeakVsBudget}; // the overhead plots only when asked for
  if (root.has("outputs")) {
    yaml_io::Node outputs = root.at("outputs");
    outputs.only_keys({"plots"});
    if (outputs.has("plots")) {
      experiment.plots.clear();
      yaml_io::Node plots = outputs.at("plots");
      const std::vector<std::string> valid = known_plots();
      for (std::size_t i = 0; i < plots.size(); ++i) {
        std::string plot = plots.item(i).as_string();
        if (std::find(valid.begin(), valid.end(), plot) == valid.end())
          plots.item(i).fail(fmt::format("unknown plot '{}' (valid: {})", plot, join(valid)));
        if (plot == kPlotThroughputVsBatch && experiment.batches.empty())
          plots.item(i).fail(fmt::format("plot '{}' needs a batch axis (sweep.batch: [32, 64, ...])", plot));
        if (std::find(experiment.plots.begin(), experiment.plots.end(), plot) == experiment.plots.end())
          experiment.plots.push_back(plot);
      }
    }
  }
  if (root.has("search")) {
    experiment.search = load_search_settings(root.at("search"), experiment);
    if (root.has("outputs") && root.at("outputs").has("plots"))
      root.at("outputs").at("plots").fail("a search experiment draws one plot, capacity.png: no plots to choose");
    experiment.plots = {kPlotCapacity};
  }
  if (root.has("engine")) {
    const std::string text = root.at("engine").as_string();
    const auto engine = engine_kind_from_string(text);
    if (!engine)
      root.at("engine").fail(fmt::format("'{}' is not an engine (valid: simgrid, fast)", text));
    experiment.simulation.engine = *engine;
  }
  if (root.has("allocator")) {
    const std::string text = root.at("allocator").as_string();
    const auto allocator = allocator_kind_from_string(text);
    if (!allocator)
      root.at("allocator").fail(fmt::format("'{}' is not an allocator (valid: bytes, pool)", text));
    experiment.simulation.allocator = *allocator;
  }
  if (root.has("parallelism")) {
    yaml_io::Node parallelism = root.at("parallelism");
    parallelism.only_keys({"jobs"});
    if (parallelism.has("jobs")) {
      std::int64_t jobs = parallelism.at("jobs").as_int();
      if (jobs < 1 || jobs > 4096)
        parallelism.at("jobs").fail(fmt::format("jobs must be between 1 and 4096, found {}", jobs));
      experiment.jobs = static_cast<unsigned>(jobs);
    }
  }
  return experiment;
}

void set_study_workload(ScaleStudy& study, const Workload& workload, std::shared_ptr<const Trace> recorded)
{
  if (workload.generator.is_null()) {
    study.recorded = recorded ? std::move(recorded) : std::make_shared<const Trace>(workload.trace);
    study.recorded_name = workload.trace_file.string();
  } else {
    study.generator = workload.generator.at("kind").get<std::string>();
    study.generator_params = workload.generator;
    study.generator_params.erase("kind");
  }
}

void materialize_workloads(Experiment& experiment, const std::filesystem::path& out_dir)
{
  std::set<std::filesystem::path> written; // the single model is shared by the workload's k values
  for (Workload& workload : experiment.workloads) {
    if (workload.single_model && workload.single_model_file.empty()) {
      std::filesystem::path dir = out_dir / "workloads";
      std::filesystem::create_directories(dir);
      workload.single_model_file =
          std::filesystem::absolute(dir / (workload.single_model_name + ".trace.json")).lexically_normal();
      if (written.insert(workload.single_model_file).second)
        save_trace(*workload.single_model, workload.single_model_file);
    }
    if (!workload.trace_file.empty())
      continue;
    std::filesystem::path dir = out_dir / "workloads";
    std::filesystem::create_directories(dir);
    workload.trace_file = std::filesystem::absolute(dir / (workload.name + ".trace.json")).lexically_normal();
    save_trace(workload.trace, workload.trace_file);
  }
}

void for_each_grid_point(const Experiment& experiment, const std::function<void(const GridPoint&)>& visit)
{
  std::vector<std::optional<double>> bandwidths(experiment.bandwidths.begin(), experiment.bandwidths.end());
  if (bandwidths.empty())
    bandwidths.emplace_back(std::nullopt);
  for (const Workload& workload : experiment.workloads)
    for (const PlannerChoice& planner : experiment.planners)
      for (const BudgetChoice& budget : experiment.budgets)
        for (const std::optional<double>& bandwidth : bandwidths)
          visit({workload, planner, budget, bandwidth});
}

std::vector<Cell> expand_cells(const Experiment& experiment)
{
  const double own_bandwidth = own_host_bandwidth(experiment.machine);
  std::map<const Workload*, std::string> trace_hashes; // one hash per workload, not per cell
  for (const Workload& workload : experiment.workloads)
    trace_hashes.emplace(&workload, stable_hash(trace_to_json(workload.trace).dump()));
  std::vector<Cell> cells;
  for_each_grid_point(experiment, [&](const GridPoint& point) {
    Cell cell;
    cell.index = cells.size();
    cell.workload = point.workload.name;
    cell.trace_file = point.workload.trace_file;
    cell.trace_hash = trace_hashes.at(&point.workload);
    cell.machine = experiment.machine.name;
    cell.machine_file = experiment.machine_file;
    cell.machine_hash = experiment.machine_hash;
    cell.planner_label = point.planner.label;
    cell.planner = point.planner.name;
    cell.params = point.planner.params;
    if (point.budget.bytes) {
      cell.budget_bytes = *point.budget.bytes;
    } else {
      cell.budget_fraction = point.budget.fraction_of_peak;
      cell.budget_bytes = static_cast<std::uint64_t>(
          std::floor(*point.budget.fraction_of_peak * static_cast<double>(point.workload.default_peak_bytes)));
    }
    cell.bandwidth_override = point.bandwidth;
    cell.bandwidth_bytes_per_s = point.bandwidth ? *point.bandwidth : own_bandwidth;
    cell.engine = experiment.simulation.engine;
    cell.allocator = experiment.simulation.allocator;
    cell.base_workload = point.workload.base;
    cell.batch = point.workload.batch;
    cell.models = point.workload.models;
    if (cell.models && point.workload.single_model && planner_fuses_models(cell.planner)) {
      cell.single_model_file = point.workload.single_model_file;
      cell.single_model_hash = stable_hash(trace_to_json(*point.workload.single_model).dump());
      cell.params["models"] = *cell.models;
    }
    cells.push_back(std::move(cell));
  });
  return cells;
}

Json cell_to_json(const Cell& cell)
{
  Json document{{"cell_format", kCellFormat},
                {"index", cell.index},
                {"workload", cell.workload},
                {"trace_file", cell.trace_file.string()},
                {"trace_hash", cell.trace_hash},
                {"machine", cell.machine},
                {"machine_file", cell.machine_file.string()},
                {"machine_hash", cell.machine_hash},
                {"planner_label", cell.planner_label},
                {"planner", cell.planner},
                {"params", cell.params},
                {"budget_bytes", cell.budget_bytes},
                {"budget_fraction", optional_number(cell.budget_fraction)},
                {"bandwidth_override", optional_number(cell.bandwidth_override)},
                {"bandwidth_bytes_per_s", cell.bandwidth_bytes_per_s}};
  // Only when not the default, so the keys (and caches) of experiments from before these options stay valid.
  if (cell.engine != EngineKind::simgrid)
    document["engine"] = std::string(to_string(cell.engine));
  if (cell.allocator != AllocatorKind::bytes)
    document["allocator"] = std::string(to_string(cell.allocator));
  if (cell.batch || cell.models)
    document["base_workload"] = cell.base_workload;
  if (cell.batch)
    document["batch"] = *cell.batch;
  if (cell.models)
    document["models"] = *cell.models;
  if (!cell.single_model_hash.empty()) {
    document["single_model_file"] = cell.single_model_file.string();
    document["single_model_hash"] = cell.single_model_hash;
  }
  return document;
}

Cell cell_from_json(const Json& document, const std::string& source_name)
{
  json_io::Node root(document, source_name);
  root.only_keys({"cell_format",
                  "index",
                  "workload",
                  "trace_file",
                  "trace_hash",
                  "machine",
                  "machine_file",
                  "machine_hash",
                  "planner_label",
                  "planner",
                  "params",
                  "budget_bytes",
                  "budget_fraction",
                  "bandwidth_override",
                  "bandwidth_bytes_per_s",
                  "engine",
                  "allocator",
                  "base_workload",
                  "batch",
                  "models",
                  "single_model_file",
                  "single_model_hash"});
  if (root.at("cell_format").as_int() != kCellFormat)
    root.at("cell_format").fail(fmt::format("unsupported cell format (this build reads {})", kCellFormat));
  Cell cell;
  cell.index = root.at("index").as_uint();
  cell.workload = root.at("workload").as_string();
  cell.trace_file = root.at("trace_file").as_string();
  cell.trace_hash = root.at("trace_hash").as_string();
  cell.machine = root.at("machine").as_string();
  cell.machine_file = root.at("machine_file").as_string();
  cell.machine_hash = root.at("machine_hash").as_string();
  cell.planner_label = root.at("planner_label").as_string();
  cell.planner = root.at("planner").as_string();
  cell.params = root.at("params").value();
  cell.budget_bytes = root.at("budget_bytes").as_uint();
  if (!root.at("budget_fraction").value().is_null())
    cell.budget_fraction = root.at("budget_fraction").as_number();
  if (!root.at("bandwidth_override").value().is_null())
    cell.bandwidth_override = root.at("bandwidth_override").as_number();
  cell.bandwidth_bytes_per_s = root.at("bandwidth_bytes_per_s").as_number();
  if (root.has("engine")) {
    const auto engine = engine_kind_from_string(root.at("engine").as_string());
    if (!engine)
      root.at("engine").fail("unknown engine");
    cell.engine = *engine;
  }
  if (root.has("allocator")) {
    const auto allocator = allocator_kind_from_string(root.at("allocator").as_string());
    if (!allocator)
      root.at("allocator").fail("unknown allocator");
    cell.allocator = *allocator;
  }
  if (root.has("base_workload"))
    cell.base_workload = root.at("base_workload").as_string();
  if (root.has("batch"))
    cell.batch = root.at("batch").as_int();
  if (root.has("models"))
    cell.models = root.at("models").as_int();
  if (root.has("single_model_file")) {
    cell.single_model_file = root.at("single_model_file").as_string();
    cell.single_model_hash = root.at("single_model_hash").as_string();
  }
  return cell;
}

std::string cell_key(const Cell& cell) { return stable_hash(key_json(cell).dump()); }

std::string describe_cell(const Cell& cell)
{
  std::string budget = cell.budget_fraction ? fmt::format("{}xpeak({})", format_number(*cell.budget_fraction),
                                                          units::format_bytes(static_cast<double>(cell.budget_bytes)))
                                            : units::format_bytes(static_cast<double>(cell.budget_bytes));
  std::string text = fmt::format("{} {} {}", cell.workload, cell.planner_label, budget);
  if (cell.bandwidth_override)
    text += fmt::format(" {}GB/s", format_number(*cell.bandwidth_override / 1e9));
  return text;
}

CellResult run_cell(const Cell& cell, const std::filesystem::path& planner_state_dir)
{
  const Trace trace = load_trace(cell.trace_file);
  if (stable_hash(trace_to_json(trace).dump()) != cell.trace_hash)
    throw InputError(cell.trace_file.string(), "the trace changed since the sweep was expanded; rerun the sweep");
  Machine machine = load_machine(cell.machine_file);
  if (cell.bandwidth_override)
    machine.set_host_link_bandwidth(*cell.bandwidth_override);

  CellResult result;
  result.ideal_time_s = CostModel(trace, machine).ideal_time(0);
  result.excess_peak_ratio =
      static_cast<double>(default_memory_profile(trace).peak_bytes) / static_cast<double>(machine.gpus.at(0).memory);
  PlanRequest request;
  request.budget_bytes = cell.budget_bytes;
  request.devices = 1;
  request.params = cell.params;
  request.state_dir = planner_state_dir;
  std::optional<Trace> single_model;
  if (!cell.single_model_hash.empty()) {
    single_model = load_trace(cell.single_model_file);
    if (stable_hash(trace_to_json(*single_model).dump()) != cell.single_model_hash)
      throw InputError(cell.single_model_file.string(),
                       "the trace changed since the sweep was expanded; rerun the sweep");
  }
  const Trace& planned = single_model ? *single_model : trace;
  Plan plan;
  try {
    plan = make_plan(cell.planner, planned, machine, request);
  } catch (const Infeasible& error) {
    result.feasible = false;
    result.stage = "plan";
    result.reason = error.what();
    return result;
  }
  SimOptions options;
  options.engine = cell.engine;
  options.allocator = cell.allocator;
  const RunResult run = simulate(planned, machine, plan, options);
  result.metrics = run.metrics;
  // A planner that records its configuration's own peak before optimization (mu-two's sub-arrays, hfta's subsets)
  // replaces the whole trace's keep-all peak (Fig. 9d).
  if (plan.params.is_object() && plan.params.contains("keep_all_peak_bytes"))
    result.excess_peak_ratio =
        plan.params["keep_all_peak_bytes"].get<double>() / static_cast<double>(machine.gpus.at(0).memory);
  if (plan.params.is_object() && plan.params.contains("partition"))
    result.partition = plan.params["partition"].is_string() ? plan.params["partition"].get<std::string>()
                                                            : plan.params["partition"].dump();
  if (!run.metrics.feasible || run.error) {
    result.feasible = false;
    result.stage = "simulate";
    result.reason = run.error ? run.error->message : "the simulator found the plan infeasible";
  }
  return result;
}

Json cell_result_to_json(const Cell& cell, const CellResult& result)
{
  const Metrics& m = result.metrics;
  return Json{{"format", "memsim-cell-result"},
              {"version", 2}, // 2: the capacity columns (samples_per_s, ...)
              {"cell", cell_to_json(cell)},
              {"feasible", result.feasible},
              {"stage", result.stage},
              {"reason", result.reason},
              {"ideal_time_s", result.ideal_time_s},
              {"metrics",
               {{"feasible", m.feasible},
                {"iteration_time_s", m.iteration_time_s},
                {"compute_busy_s", m.compute_busy_s},
                {"stall_time_s", m.stall_time_s},
                {"recompute_time_s", m.recompute_time_s},
                {"peak_device_bytes", m.peak_device_bytes},
                {"peak_host_bytes", m.peak_host_bytes},
                {"h2d_bytes", m.h2d_bytes},
                {"d2h_bytes", m.d2h_bytes},
                {"p2p_bytes", m.p2p_bytes},
                {"steps_executed", m.steps_executed},
                {"iteration_times_s", m.iteration_times_s},
                {"steady_iteration_time_s", m.steady_iteration_time_s},
                {"samples_per_s", m.samples_per_s ? Json(*m.samples_per_s) : Json(nullptr)},
                {"pcie_h2d_utilization", m.pcie_h2d_utilization},
                {"pcie_d2h_utilization", m.pcie_d2h_utilization},
                {"swapped_bytes", m.swapped_bytes},
                {"recomputed_bytes", m.recomputed_bytes},
                {"recompute_fraction", m.recompute_fraction},
                {"swap_overlap_fraction", m.swap_overlap_fraction}}},
              {"excess_peak_ratio", result.excess_peak_ratio},
              {"partition", result.partition}};
}

CellResult cell_result_from_json(const Json& document, const std::string& source_name)
{
  json_io::Node root(document, source_name);
  root.expect_format("memsim-cell-result", 2); // older cached cells lack columns: recomputed
  root.only_keys({"format", "version", "cell", "feasible", "stage", "reason", "ideal_time_s", "metrics",
                  "excess_peak_ratio", "partition"});
  CellResult result;
  result.feasible = root.at("feasible").as_bool();
  result.stage = root.at("stage").as_string();
  result.reason = root.at("reason").as_string();
  result.ideal_time_s = root.at("ideal_time_s").as_number();
  json_io::Node metrics = root.at("metrics");
  Metrics& m = result.metrics;
  m.feasible = metrics.at("feasible").as_bool();
  m.iteration_time_s = metrics.at("iteration_time_s").as_number();
  m.compute_busy_s = metrics.at("compute_busy_s").as_number();
  m.stall_time_s = metrics.at("stall_time_s").as_number();
  m.recompute_time_s = metrics.at("recompute_time_s").as_number();
  m.peak_device_bytes = metrics.at("peak_device_bytes").as_uint();
  m.peak_host_bytes = metrics.at("peak_host_bytes").as_uint();
  m.h2d_bytes = metrics.at("h2d_bytes").as_uint();
  m.d2h_bytes = metrics.at("d2h_bytes").as_uint();
  m.p2p_bytes = metrics.at("p2p_bytes").as_uint();
  m.steps_executed = metrics.at("steps_executed").as_uint();
  if (metrics.has("iteration_times_s")) { // v2; older cell results lack them
    json_io::Node times = metrics.at("iteration_times_s");
    for (std::size_t i = 0; i < times.size(); ++i)
      m.iteration_times_s.push_back(times.item(i).as_number());
  }
  if (metrics.has("steady_iteration_time_s"))
    m.steady_iteration_time_s = metrics.at("steady_iteration_time_s").as_number();
  if (!metrics.at("samples_per_s").value().is_null())
    m.samples_per_s = metrics.at("samples_per_s").as_number();
  m.pcie_h2d_utilization = metrics.at("pcie_h2d_utilization").as_number();
  m.pcie_d2h_utilization = metrics.at("pcie_d2h_utilization").as_number();
  m.swapped_bytes = metrics.at("swapped_bytes").as_uint();
  m.recomputed_bytes = metrics.at("recomputed_bytes").as_uint();
  // Newer keys; cached results from before them read as 0 / "".
  if (metrics.has("recompute_fraction"))
    m.recompute_fraction = metrics.at("recompute_fraction").as_number();
  if (metrics.has("swap_overlap_fraction"))
    m.swap_overlap_fraction = metrics.at("swap_overlap_fraction").as_number();
  if (root.has("excess_peak_ratio"))
    result.excess_peak_ratio = root.at("excess_peak_ratio").as_number();
  if (root.has("partition"))
    result.partition = root.at("partition").as_string();
  return result;
}

std::string format_number(double value)
{
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15)
    return fmt::format("{:.0f}", value);
  return fmt::format("{}", value);
}

bool has_several_iterations(const std::vector<CellResult>& results)
{
  return std::any_of(results.begin(), results.end(),
                     [](const CellResult& result) { return result.metrics.iteration_times_s.size() > 1; });
}

std::string csv_header(bool iterations, bool batches, bool models)
{
  return std::string("workload,machine,planner,budget_bytes,bandwidth_bytes_per_s,feasible,iteration_time_s,"
                     "ideal_time_s,stall_time_s,recompute_time_s,peak_device_bytes,h2d_bytes,d2h_bytes,"
                     "compute_busy_s,p2p_bytes,peak_host_bytes,budget_fraction,planner_name,params,infeasible_stage,"
                     "reason") +
         (iterations ? ",iterations,steady_iteration_time_s,iteration_times_s" : "") +
         ",samples_per_s,pcie_h2d_utilization,pcie_d2h_utilization,swapped_bytes,recomputed_bytes" +
         (batches ? ",base_workload,batch" : "") +
         (models ? std::string(batches ? "" : ",base_workload") +
                       ",models,partition,recompute_fraction,swap_overlap_fraction,excess_peak_ratio,gpu_hours_10k"
                 : "");
}

std::string csv_row(const Cell& cell, const CellResult& result, bool iterations, bool batches, bool models)
{
  const Metrics& m = result.metrics;
  // Infeasible rows leave the measurements empty: a plan that did not run has no iteration time.
  auto measured = [&](const std::string& text) { return result.feasible ? text : std::string(); };
  std::vector<std::string> fields{
      csv_field(cell.workload),
      csv_field(cell.machine),
      csv_field(cell.planner_label),
      fmt::format("{}", cell.budget_bytes),
      format_number(cell.bandwidth_bytes_per_s),
      result.feasible ? "true" : "false",
      measured(format_number(m.iteration_time_s)),
      format_number(result.ideal_time_s),
      measured(format_number(m.stall_time_s)),
      measured(format_number(m.recompute_time_s)),
      measured(fmt::format("{}", m.peak_device_bytes)),
      measured(fmt::format("{}", m.h2d_bytes)),
      measured(fmt::format("{}", m.d2h_bytes)),
      measured(format_number(m.compute_busy_s)),
      measured(fmt::format("{}", m.p2p_bytes)),
      measured(fmt::format("{}", m.peak_host_bytes)),
      cell.budget_fraction ? format_number(*cell.budget_fraction) : std::string(),
      csv_field(cell.planner),
      csv_field(cell.params.dump()),
      csv_field(result.stage),
      csv_field(result.reason),
  };
  if (iterations) {
    std::string times;
    for (double time : m.iteration_times_s)
      times += (times.empty() ? "" : ";") + format_number(time);
    fields.push_back(measured(fmt::format("{}", m.iteration_times_s.size())));
    fields.push_back(measured(format_number(m.steady_iteration_time_s)));
    fields.push_back(measured(csv_field(times)));
  }
  // Last, after every older column, so that files written before them keep their column positions.
  fields.push_back(measured(m.samples_per_s ? format_number(*m.samples_per_s) : std::string()));
  fields.push_back(measured(format_number(m.pcie_h2d_utilization)));
  fields.push_back(measured(format_number(m.pcie_d2h_utilization)));
  fields.push_back(measured(fmt::format("{}", m.swapped_bytes)));
  fields.push_back(measured(fmt::format("{}", m.recomputed_bytes)));
  if (batches) {
    fields.push_back(csv_field(cell.base_workload));
    fields.push_back(cell.batch ? fmt::format("{}", *cell.batch) : std::string());
  }
  if (models) {
    if (!batches)
      fields.push_back(csv_field(cell.base_workload));
    fields.push_back(cell.models ? fmt::format("{}", *cell.models) : std::string());
    fields.push_back(csv_field(result.partition));
    fields.push_back(measured(format_number(m.recompute_fraction)));
    fields.push_back(measured(format_number(m.swap_overlap_fraction)));
    fields.push_back(format_number(result.excess_peak_ratio));
    fields.push_back(measured(format_number(m.steady_iteration_time_s * 10000 / 3600)));
  }
  std::string row;
  for (std::size_t i = 0; i < fields.size(); ++i)
    row += (i == 0 ? "" : ",") + fields[i];
  return row;
}

} // namespace memsim::experiments
