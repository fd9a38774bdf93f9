// memsim max-scale: the largest batch / width / depth of a generated workload that a planner trains in a budget.
#include "commands.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"
#include "memsim/experiments/experiment.hpp"
#include "memsim/experiments/scale_study.hpp"
#include "memsim/planners/planner.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <memory>

namespace memsim::cli {
namespace {

using experiments::CapacityResult;
using experiments::Probe;
using experiments::ScaleStudy;

struct Options {
  std::string workload;
  std::string axis = "batch";
  std::string axis_param;
  double axis_step = 1;
  std::string fusion;       // the models axis: efficiency (default), batch-proxy or measured
  std::string fused_traces; // with fusion measured: the recordings' directory
  std::string planner;
  std::vector<std::string> params;
  std::string machine;
  std::string budget = "0";
  std::optional<double> min_throughput;
  std::optional<double> max_overhead;
  std::int64_t start = 1;
  std::int64_t limit = 1 << 16;
  std::int64_t scan = 8;
  std::string engine = "fast";
  std::string allocator = "bytes";
  bool json = false;
  experiments::Progress progress = experiments::Progress::automatic;
  std::filesystem::path state_dir;
};

// The largest value found, in the parameter's units (a whole number unless --axis-step says otherwise).
nlohmann::json largest_json(const ScaleStudy& study, std::int64_t largest)
{
  return study.axis_step == 1 ? nlohmann::json(largest) : nlohmann::json(experiments::axis_value(study, largest));
}

nlohmann::json probe_to_json(const Probe& probe)
{
  nlohmann::json document{{"value", probe.value}, {"feasible", probe.outcome.feasible}};
  if (probe.outcome.iteration_time_s > 0) {
    document["iteration_time_s"] = probe.outcome.iteration_time_s;
    document["samples_per_s"] = probe.outcome.samples_per_s;
  }
  if (!probe.outcome.reason.empty())
    document["reason"] = probe.outcome.reason;
  return document;
}

// One search, with its probes and the planner's status on the progress line.
CapacityResult search(const ScaleStudy& study, const experiments::CapacitySearchOptions& bounds, const char* label,
                      experiments::Progress style)
{
  experiments::ProgressLine progress(style);
  auto observe = [&](const Probe& probe, std::size_t count) {
    progress.show(fmt::format("{}: probe {}: {} {} {}", label, count, experiments::to_string(study.axis), probe.value,
                              probe.outcome.feasible ? "fits" : "does not fit"));
  };
  ScaleStudy probing = study;
  if (progress.enabled()) // a planner's own status while a long probe runs
    probing.planner_progress = [&progress, label](const std::string& status) {
      progress.show(fmt::format("{}: {}", label, status));
    };
  CapacityResult result =
      experiments::find_largest_feasible([&](std::int64_t value) { return experiments::probe_study(probing, value); },
                                         bounds, observe);
  progress.clear();
  return result;
}

void run(const Options& options, Context& context)
{
  ScaleStudy study;
  experiments::parse_workload_spec(options.workload, study);
  const std::optional<experiments::ScaleAxis> axis = experiments::scale_axis_from_string(options.axis);
  if (!axis)
    throw InputError("--axis", fmt::format("unknown axis '{}' (valid: batch, width, depth, models)", options.axis));
  experiments::set_axis(study, *axis, options.axis_param);
  experiments::set_axis_step(study, options.axis_step);
  if (!options.fusion.empty() || !options.fused_traces.empty()) {
    if (*axis != experiments::ScaleAxis::models)
      throw InputError(options.fusion.empty() ? "--fused-traces" : "--fusion", "only the models axis fuses");
    if (!options.fusion.empty())
      study.fusion = parse_fusion_model(options.fusion);
    if ((study.fusion == FusionModel::measured) != !options.fused_traces.empty())
      throw InputError("--fused-traces", study.fusion == FusionModel::measured
                                             ? "--fusion measured needs the directory of recorded fused traces"
                                             : "is read only with --fusion measured");
    study.fused_traces = options.fused_traces;
  }
  const PlannerInfo& planner = planner_registry().get(options.planner);
  study.planner = planner.name;
  study.planner_params = parse_param_assignments(planner, options.params);
  study.planner_state_dir = options.state_dir;
  study.machine = load_machine_or_preset(options.machine, default_presets_dir());
  try {
    study.budget_bytes = units::parse_bytes(options.budget);
  } catch (const std::invalid_argument& error) {
    throw InputError("--budget", fmt::format("'{}': {}", options.budget, error.what()));
  }
  const std::optional<EngineKind> engine = engine_kind_from_string(options.engine);
  if (!engine)
    throw InputError("--engine", fmt::format("unknown engine '{}' (valid: fast, simgrid)", options.engine));
  if (*engine == EngineKind::simgrid)
    throw InputError("--engine", "a search simulates many plans in one process: only the fast engine can");
  study.simulation.engine = *engine;
  const std::optional<AllocatorKind> allocator = allocator_kind_from_string(options.allocator);
  if (!allocator)
    throw InputError("--allocator", fmt::format("unknown allocator '{}' (valid: bytes, pool)", options.allocator));
  study.simulation.allocator = *allocator;
  if (options.start < 1 || options.limit < options.start)
    throw InputError("--start", fmt::format("need 1 <= --start ({}) <= --limit ({})", options.start, options.limit));

  study.max_overhead = options.max_overhead;

  const experiments::CapacitySearchOptions bounds{options.start, options.limit, options.scan};
  const auto started = std::chrono::steady_clock::now();
  nlohmann::json floor_document;
  if (options.min_throughput) {
    // The floor: F x keep-all's samples/s at keep-all's own largest batch.
    ScaleStudy baseline = study;
    experiments::set_axis(baseline, experiments::ScaleAxis::batch, "");
    baseline.planner = "keep-all";
    baseline.planner_params = nlohmann::json::object();
    const CapacityResult keep_all = search(baseline, bounds, "keep-all", options.progress);
    if (!keep_all.largest)
      throw Infeasible(fmt::format("--min-throughput: keep-all trains no batch from {} on", options.start));
    const double keep_all_rate = find_probe(keep_all, *keep_all.largest)->outcome.samples_per_s;
    study.min_samples_per_s = *options.min_throughput * keep_all_rate;
    floor_document = {{"fraction", *options.min_throughput},
                      {"keep_all_batch", *keep_all.largest},
                      {"keep_all_samples_per_s", keep_all_rate},
                      {"min_samples_per_s", *study.min_samples_per_s}};
  }
  const CapacityResult result = search(study, bounds, study.planner.c_str(), options.progress);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const Probe* best = result.largest ? find_probe(result, *result.largest) : nullptr;

  if (options.json) {
    nlohmann::json probes = nlohmann::json::array();
    for (const Probe& probe : result.probes)
      probes.push_back(probe_to_json(probe));
    nlohmann::json document{{"format", "memsim-max-scale"},
                            {"version", 1},
                            {"workload", options.workload},
                            {"axis", experiments::to_string(study.axis)},
                            {"axis_param", study.axis_param},
                            {"planner", study.planner},
                            {"params", study.planner_params},
                            {"machine", study.machine.name},
                            {"budget_bytes", study.budget_bytes},
                            {"largest", result.largest ? largest_json(study, *result.largest) : nlohmann::json()},
                            {"reached_limit", result.reached_limit},
                            {"probes", probes}};
    if (best) {
      document["iteration_time_s"] = best->outcome.iteration_time_s;
      document["samples_per_s"] = best->outcome.samples_per_s;
    }
    if (!floor_document.is_null())
      document["throughput_floor"] = floor_document;
    if (study.max_overhead)
      document["max_overhead"] = *study.max_overhead;
    if (study.axis_step != 1)
      document["axis_step"] = study.axis_step;
    fmt::print("{}\n", document.dump(2));
  } else if (best) {
    fmt::print("largest {} ({}) for {} with {}: {} — iteration {}, {:.6g} samples/s{}\n",
               experiments::to_string(study.axis), study.axis_param, options.workload, study.planner,
               experiments::format_number(experiments::axis_value(study, *result.largest)),
               units::format_duration(best->outcome.iteration_time_s), best->outcome.samples_per_s,
               result.reached_limit ? " (the --limit: larger values were not tried)" : "");
  } else {
    fmt::print("no {} from {} on fits for {} with {}: {}\n", experiments::to_string(study.axis), options.start,
               options.workload, study.planner, result.probes.front().outcome.reason);
  }
  fmt::print(stderr, "max-scale: {} probes in {:.2f} s\n", result.probes.size(), wall_s);
  if (!result.largest)
    context.exit_code = 1;
}

} // namespace

void add_max_scale_command(CLI::App& app, Context& context)
{
  auto options = std::make_shared<Options>();
  CLI::App* command =
      app.add_subcommand("max-scale",
                         "The largest batch, width, depth or number of models of a workload (generated, or a "
                         "recorded trace rescaled or fused) that a planner trains in a budget");
  command
      ->add_option("--workload", options->workload,
                   "a trace file (rescaled to each batch, as memsim trace rescale does) or a generator and its "
                   "parameters: KIND or KIND:k=v,k=v (e.g. transformer:layers=24,hidden=1024)")
      ->required();
  command
      ->add_option("--axis", options->axis,
                   "batch, width, depth, or models (k copies of the workload fused into one, as `memsim gen fuse` "
                   "makes them under --fusion; samples/s counts every model)")
      ->default_val("batch");
  command->add_option("--fusion", options->fusion,
                      "the models axis: how the copies are fused (efficiency, batch-proxy, or measured: recorded "
                      "vmap-fused traces, see memsim gen fuse --help; default efficiency)");
  command->add_option("--fused-traces", options->fused_traces,
                      "with --fusion measured: directory of recorded fused traces "
                      "<model>-b<batch>-k<K>-<tag>.trace.json[.gz] (e.g. traces/data/fused-h200; --limit to the K "
                      "recorded)");
  command->add_option(
      "--axis-param", options->axis_param,
      "the generator's parameter the axis sets, integer or a scale (default: batch; depth or layers; width or "
      "hidden)");
  command
      ->add_option("--axis-step", options->axis_step,
                   "the parameter is the axis value times this (e.g. 0.125: width in eighths; a number parameter "
                   "only)")
      ->default_val(1.0);
  command->add_option("--planner", options->planner, "planner name (see `memsim planners`)")->required();
  command->add_option("--param", options->params, "planner parameter name=value (repeatable)");
  command->add_option("--machine", options->machine, "machine preset name or YAML file")->required();
  command->add_option("--budget", options->budget,
                      "device memory budget: bytes or a size such as 12GiB (default: the GPU's memory)");
  command
      ->add_option("--min-throughput", options->min_throughput,
                   "also require samples/s >= this fraction of keep-all's at keep-all's largest batch")
      ->check(CLI::Range(0.0, 1e6));
  command
      ->add_option("--max-overhead", options->max_overhead,
                   "also require the iteration time <= this x keep-all's on the same workload with unlimited GPU "
                   "memory (DTR's and DyNN-Offload's max-batch rule: 2), per iteration when the plan runs more "
                   "iterations than the workload (mu-two's ring)")
      ->check(CLI::Range(1.0, 1e6));
  command->add_option("--start", options->start, "smallest value tried")->default_val(1);
  command->add_option("--limit", options->limit, "largest value tried")->default_val(1 << 16);
  command->add_option("--scan", options->scan, "values scanned above the bisected boundary")
      ->default_val(8)
      ->check(CLI::Range(0, 1 << 20));
  command->add_option("--engine", options->engine, "simulation engine (fast)")->default_val("fast");
  command->add_option("--allocator", options->allocator, "bytes or pool")->default_val("bytes");
  command->add_flag("--json", options->json, "print the search (every probe) as JSON");
  add_progress_option(command, options->progress);
  add_state_dir_option(command, options->state_dir);
  command->callback([options, &context] { run(*options, context); });
}

} // namespace memsim::cli
