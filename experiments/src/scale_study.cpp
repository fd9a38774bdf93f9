#include "memsim/experiments/scale_study.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/fuse.hpp"
#include "memsim/hwmodels/rescale.hpp"
#include "memsim/hwmodels/roofline.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/traces/generator_registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <limits>

namespace memsim::experiments {
namespace {

const GeneratorInfo& generator_info(const std::string& kind, const std::string& where)
{
  const GeneratorInfo* info = generator_registry().find(kind);
  if (!info)
    throw InputError(where, fmt::format("unknown generator '{}' (valid: {})", kind, generator_registry().names()));
  return *info;
}

const ParamSpec* find_param(const GeneratorInfo& info, const std::string& name)
{
  for (const ParamSpec& spec : info.params)
    if (spec.name == name)
      return &spec;
  return nullptr;
}

// An axis value is a whole number: it can set an integer parameter or a number one (a scale: x1, x2, ...).
bool numeric(const ParamSpec& spec) { return spec.type == ParamType::integer || spec.type == ParamType::number; }

std::string numeric_params(const GeneratorInfo& info)
{
  std::string names;
  for (const ParamSpec& spec : info.params)
    if (numeric(spec))
      names += (names.empty() ? "" : ", ") + spec.name;
  return names.empty() ? "none" : names;
}

ParamValues values_at(const ScaleStudy& study, std::int64_t value)
{
  const GeneratorInfo& info = generator_info(study.generator, "--workload");
  nlohmann::json given = study.generator_params;
  if (study.axis == ScaleAxis::models) // the generated model stays as given; fuse_trace makes the copies
    return generator_registry().complete_params(info, given);
  if (study.axis_step == 1)
    given[study.axis_param] = value;
  else
    given[study.axis_param] = axis_value(study, value);
  return generator_registry().complete_params(info, given);
}

Trace generate_at(const ScaleStudy& study, std::int64_t value)
{
  const GeneratorInfo& info = generator_info(study.generator, "--workload");
  const Gpu& gpu = study.machine.gpus.at(0);
  return info.make(values_at(study, value), [&](const std::string& dtype) {
    std::optional<Roofline> roofline = roofline_of(gpu, dtype);
    if (!roofline)
      throw InputError("--workload", fmt::format("GPU '{}' of machine '{}' has no peak_flops for {}", gpu.name,
                                                 study.machine.name, dtype));
    return *roofline;
  });
}

// The models axis's single model: the recorded trace moved to the machine's GPU at its own batch, or the generator
// at its given parameters.
Trace workload_at_base(const ScaleStudy& study)
{
  if (!study.recorded)
    return generate_at(study, 0);
  if (study.recorded->source.batch <= 0)
    throw InputError(study.recorded_name + ": at /source/batch", "the models axis needs the trace's batch");
  return rescale_trace(*study.recorded, study.recorded->source.batch, study.machine.gpus.at(0), study.recorded_name);
}

} // namespace

std::string_view to_string(ScaleAxis axis)
{
  switch (axis) {
  case ScaleAxis::batch: return "batch";
  case ScaleAxis::width: return "width";
  case ScaleAxis::depth: return "depth";
  case ScaleAxis::models: return "models";
  }
  return "?";
}

std::optional<ScaleAxis> scale_axis_from_string(std::string_view text)
{
  for (ScaleAxis axis : {ScaleAxis::batch, ScaleAxis::width, ScaleAxis::depth, ScaleAxis::models})
    if (to_string(axis) == text)
      return axis;
  return std::nullopt;
}

void parse_workload_spec(const std::string& text, ScaleStudy& study, const std::string& where)
{
  if (std::filesystem::is_regular_file(text)) {
    study.recorded = std::make_shared<const Trace>(load_trace(text));
    study.recorded_name = text;
    study.generator.clear();
    study.generator_params = nlohmann::json::object();
    return;
  }
  const std::size_t colon = text.find(':');
  study.generator = text.substr(0, colon);
  const GeneratorInfo& info = generator_info(study.generator, where);
  std::vector<std::string> assignments;
  if (colon != std::string::npos) {
    std::string rest = text.substr(colon + 1);
    std::size_t begin = 0;
    while (begin <= rest.size()) {
      const std::size_t comma = rest.find(',', begin);
      const std::string item = rest.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
      if (item.empty())
        throw InputError(where, fmt::format("'{}': empty parameter in the list after '{}:'", text, study.generator));
      assignments.push_back(item);
      if (comma == std::string::npos)
        break;
      begin = comma + 1;
    }
  }
  study.generator_params = generator_registry().parse_assignments(info, assignments, where);
}

std::string resolve_axis_param(const std::string& generator, ScaleAxis axis, const std::string& requested)
{
  const GeneratorInfo& info = generator_info(generator, "--workload");
  if (!requested.empty()) {
    const ParamSpec* spec = find_param(info, requested);
    if (!spec || !numeric(*spec))
      throw InputError("--axis-param", fmt::format("generator '{}' has no numeric parameter '{}' (numeric ones: {})",
                                                   generator, requested, numeric_params(info)));
    return requested;
  }
  std::vector<std::string> candidates;
  switch (axis) {
  case ScaleAxis::batch: candidates = {"batch"}; break;
  case ScaleAxis::depth: candidates = {"depth", "layers"}; break;
  case ScaleAxis::width: candidates = {"width", "hidden"}; break;
  case ScaleAxis::models: return "models"; // no generator parameter: the workload is fused k times
  }
  for (const std::string& name : candidates)
    if (const ParamSpec* spec = find_param(info, name); spec && numeric(*spec))
      return name;
  throw InputError("--axis", fmt::format("generator '{}' has no parameter for the {} axis (numeric ones: {}); "
                                         "name one with --axis-param",
                                         generator, to_string(axis), numeric_params(info)));
}

void set_axis(ScaleStudy& study, ScaleAxis axis, const std::string& requested)
{
  study.axis = axis;
  study.axis_step = 1;
  if (axis == ScaleAxis::models) {
    if (!requested.empty() && requested != "models")
      throw InputError("--axis-param", fmt::format("the models axis fuses copies of the workload and sets no "
                                                   "parameter; found '{}'",
                                                   requested));
    study.axis_param = "models";
    return;
  }
  if (!study.recorded) {
    study.axis_param = resolve_axis_param(study.generator, axis, requested);
    return;
  }
  if (axis != ScaleAxis::batch || !(requested.empty() || requested == "batch"))
    throw InputError("--axis", fmt::format("{} is a recorded trace: it scales along the batch only (memsim trace "
                                           "rescale); width and depth need a generator",
                                           study.recorded_name));
  study.axis_param = "batch";
}

void set_axis_step(ScaleStudy& study, double step)
{
  if (!(step > 0) || !std::isfinite(step))
    throw InputError("--axis-step", fmt::format("the axis step must be a positive number, found {}", step));
  if (step != 1) {
    const ParamSpec* spec = study.recorded || study.axis == ScaleAxis::models
                                ? nullptr
                                : find_param(generator_info(study.generator, "--workload"), study.axis_param);
    if (!spec || spec->type != ParamType::number)
      throw InputError("--axis-step", fmt::format("a step of {} needs a generator parameter that takes a number (a "
                                                  "scale such as width); '{}' does not",
                                                  step, study.recorded ? study.recorded_name : study.axis_param));
  }
  study.axis_step = step;
}

double axis_value(const ScaleStudy& study, std::int64_t value) { return static_cast<double>(value) * study.axis_step; }

Trace workload_at(const ScaleStudy& study, std::int64_t value)
{
  if (study.axis == ScaleAxis::models) {
    if (value < 1 || value > std::numeric_limits<int>::max())
      throw InputError("--axis", fmt::format("{} models: the models axis needs 1 or more", value));
    const std::string name = study.recorded ? study.recorded_name : study.generator;
    return fuse_models(workload_at_base(study), static_cast<int>(value), study.fusion, study.fused_traces, std::nullopt,
                       name);
  }
  if (study.recorded)
    return rescale_trace(*study.recorded, value, study.machine.gpus.at(0), study.recorded_name);
  return generate_at(study, value);
}

bool planner_fuses_models(const std::string& planner)
{
  const PlannerInfo& info = planner_registry().get(planner);
  return std::any_of(info.params.begin(), info.params.end(),
                     [](const ParamSpec& spec) { return spec.name == "models"; });
}

ProbeOutcome probe_study(const ScaleStudy& study, std::int64_t value)
{
  const bool fuses_itself = study.axis == ScaleAxis::models && planner_fuses_models(study.planner);
  const Trace trace = workload_at(study, fuses_itself ? 1 : value);
  PlanRequest request;
  request.budget_bytes = study.budget_bytes;
  request.params = study.planner_params;
  request.progress = study.planner_progress;
  request.state_dir = study.planner_state_dir;
  if (fuses_itself) {
    request.params["models"] = value;
    // Fused as the axis fuses, unless the parameters say otherwise (measured: the planner refuses, naming why).
    if (study.fusion != FusionModel::efficiency && !request.params.contains("fusion"))
      request.params["fusion"] = study.fusion == FusionModel::measured ? "measured" : "batch-proxy";
  }
  ProbeOutcome outcome;
  Plan plan;
  try {
    plan = make_plan(study.planner, trace, study.machine, request);
  } catch (const Infeasible& error) {
    outcome.reason = fmt::format("no plan: {}", error.what());
    return outcome;
  } catch (const InputError& error) {
    // The planner cannot take this workload (rotor on a trace with no chain view): nothing trains with it.
    outcome.reason = fmt::format("the planner refuses the workload: {}", error.what());
    return outcome;
  }
  SimOptions options = study.simulation;
  options.record_timeline = false;
  const RunResult run = simulate(trace, study.machine, plan, options);
  if (!run.metrics.feasible || run.error) {
    outcome.reason = run.error ? run.error->message : "the simulator found the plan infeasible";
    return outcome;
  }
  outcome.iteration_time_s = run.metrics.iteration_time_s;
  // The core's figure (a fused trace counts its models, hfta's plan its own); 0 when the trace says no batch.
  outcome.samples_per_s = run.metrics.samples_per_s.value_or(0);
  outcome.feasible = true;
  if (study.min_samples_per_s && outcome.samples_per_s < *study.min_samples_per_s) {
    outcome.feasible = false;
    outcome.reason =
        fmt::format("{:.6g} samples/s is below the floor of {:.6g}", outcome.samples_per_s, *study.min_samples_per_s);
    return outcome;
  }
  if (study.max_overhead) {
    // Against keep-all on the whole workload (the N-model fused trace when the planner fused the models itself).
    const KeepAllReference reference =
        unlimited_keep_all(fuses_itself ? workload_at(study, value) : trace, study.machine, study.simulation);
    // A plan that runs more iterations than the workload has (μ-TWO's ring runs several cycles of a one-iteration
    // trace) is compared per iteration: its time scaled to keep-all's number of iterations.
    const std::size_t iterations = std::max<std::size_t>(1, run.metrics.iteration_times_s.size());
    const bool scaled = iterations != reference.iterations;
    const double compared_s =
        scaled ? outcome.iteration_time_s * static_cast<double>(reference.iterations) / static_cast<double>(iterations)
               : outcome.iteration_time_s;
    if (compared_s > *study.max_overhead * reference.time_s) {
      outcome.feasible = false;
      outcome.reason =
          fmt::format("iteration {:.6g} s{} is over {:g} x keep-all's {:.6g} s on an unlimited GPU", compared_s,
                      scaled ? fmt::format(" ({:.6g} s for {} iterations, per {} of keep-all's)",
                                           outcome.iteration_time_s, iterations, reference.iterations)
                             : "",
                      *study.max_overhead, reference.time_s);
    }
  }
  return outcome;
}

KeepAllReference unlimited_keep_all(const Trace& trace, const Machine& machine, const SimOptions& simulation)
{
  // 1 PiB per GPU stands for unlimited: no trace comes near it, and sums of it stay far from overflow.
  constexpr std::uint64_t kUnlimited = std::uint64_t{1} << 50;
  Machine unlimited = machine;
  for (Gpu& gpu : unlimited.gpus)
    gpu.memory = kUnlimited;
  PlanRequest request;
  request.budget_bytes = kUnlimited;
  const Plan plan = make_plan("keep-all", trace, unlimited, request);
  SimOptions options = simulation;
  options.record_timeline = false;
  const RunResult run = simulate(trace, unlimited, plan, options);
  if (!run.metrics.feasible || run.error)
    throw Infeasible(fmt::format("keep-all does not run on an unlimited GPU: {}",
                                 run.error ? run.error->message : "the simulator found it infeasible"));
  return {run.metrics.iteration_time_s, std::max<std::size_t>(1, run.metrics.iteration_times_s.size())};
}

} // namespace memsim::experiments
