#include "memsim/experiments/capacity_experiment.hpp"

#include "memsim/common/atomic_file.hpp"
#include "memsim/common/error.hpp"
#include "memsim/common/files.hpp"
#include "memsim/common/stable_hash.hpp"
#include "memsim/common/units.hpp"
#include "memsim/experiments/processes.hpp"
#include "memsim/traces/generator_registry.hpp"

#include <fmt/format.h>

#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <thread>

namespace memsim::experiments {
namespace {

using Json = nlohmann::json;

// What a search's result depends on: its cache key is the hash of this document.
Json search_content(const ScaleStudy& study, const Experiment& experiment, std::optional<double> bandwidth,
                    const CapacitySearchOptions& bounds, std::optional<double> min_throughput)
{
  Json content{{"generator", study.generator},
               {"generator_params", study.generator_params},
               {"trace_hash", study.recorded ? Json(stable_hash(trace_to_json(*study.recorded).dump())) : Json()},
               {"axis", to_string(study.axis)},
               {"axis_param", study.axis_param},
               {"planner", study.planner},
               {"params", study.planner_params},
               {"machine_hash", experiment.machine_hash},
               {"budget_bytes", study.budget_bytes},
               {"bandwidth", bandwidth ? Json(*bandwidth) : Json()},
               {"start", bounds.start},
               {"limit", bounds.limit},
               {"scan", bounds.scan},
               {"min_throughput", min_throughput ? Json(*min_throughput) : Json()},
               {"engine", to_string(study.simulation.engine)},
               {"allocator", to_string(study.simulation.allocator)}};
  if (study.axis_step != 1) // only then, so searches cached before the step existed stay valid
    content["axis_step"] = study.axis_step;
  if (study.max_overhead) // likewise
    content["max_overhead"] = *study.max_overhead;
  return content;
}

Json result_to_json(const Json& content, const CapacityResult& result)
{
  Json probes = Json::array();
  for (const Probe& probe : result.probes)
    probes.push_back(Json{{"value", probe.value},
                          {"feasible", probe.outcome.feasible},
                          {"iteration_time_s", probe.outcome.iteration_time_s},
                          {"samples_per_s", probe.outcome.samples_per_s},
                          {"reason", probe.outcome.reason}});
  return Json{{"format", "memsim-capacity-search"},
              {"version", 1},
              {"content", content},
              {"largest", result.largest ? Json(*result.largest) : Json()},
              {"reached_limit", result.reached_limit},
              {"probes", probes}};
}

std::optional<CapacityResult> read_cached(const std::filesystem::path& file, const Json& content)
{
  std::error_code ignored;
  if (!std::filesystem::is_regular_file(file, ignored))
    return std::nullopt;
  Json document;
  try {
    document = Json::parse(read_text_file(file));
  } catch (const std::exception&) {
    return std::nullopt; // unreadable: recompute it
  }
  if (!document.is_object() || document.value("format", "") != "memsim-capacity-search" ||
      document.value("content", Json()) != content)
    return std::nullopt;
  CapacityResult result;
  if (!document.at("largest").is_null())
    result.largest = document.at("largest").get<std::int64_t>();
  result.reached_limit = document.at("reached_limit").get<bool>();
  for (const Json& probe : document.at("probes"))
    result.probes.push_back(
        Probe{probe.at("value").get<std::int64_t>(),
              ProbeOutcome{probe.at("feasible").get<bool>(), probe.at("iteration_time_s").get<double>(),
                           probe.at("samples_per_s").get<double>(), probe.at("reason").get<std::string>()}});
  return result;
}

// One search to run or take from the cache.
struct SearchJob {
  ScaleStudy study;
  Json content;
  CapacitySearchOptions bounds;
  std::optional<CapacityResult> result;
};

class SearchRunner {
public:
  SearchRunner(std::filesystem::path dir, unsigned jobs, Progress progress)
      : dir_(std::move(dir)), jobs_(std::max(1u, jobs)), progress_(progress)
  {
  }

  // Runs the jobs without a result (several threads: the fast engine and the planners are re-entrant); each result
  // is written to the cache as soon as it ends.
  void run(std::vector<SearchJob>& jobs, const char* what)
  {
    std::vector<SearchJob*> pending;
    for (SearchJob& job : jobs) {
      job.result = read_cached(file_of(job), job.content);
      if (job.result)
        ++cached;
      else
        pending.push_back(&job);
    }
    std::atomic<std::size_t> next{0};
    std::size_t done = 0;
    std::mutex mutex;
    std::exception_ptr failure;
    auto work = [&] {
      for (std::size_t i = next++; i < pending.size(); i = next++) {
        SearchJob& job = *pending[i];
        try {
          CapacityResult result =
              find_largest_feasible([&](std::int64_t value) { return probe_study(job.study, value); }, job.bounds);
          write_text_atomically(file_of(job), result_to_json(job.content, result).dump() + "\n");
          std::lock_guard lock(mutex);
          job.result = std::move(result);
          ++computed;
          ++done;
          progress_.show(fmt::format("{}: {}/{} searches done", what, done, pending.size()));
        } catch (...) {
          std::lock_guard lock(mutex);
          if (!failure)
            failure = std::current_exception();
          next = pending.size(); // stop handing out work
        }
      }
    };
    std::vector<std::thread> threads;
    for (unsigned t = 1; t < std::min<std::size_t>(jobs_, pending.size()); ++t)
      threads.emplace_back(work);
    work();
    for (std::thread& thread : threads)
      thread.join();
    progress_.clear();
    if (failure)
      std::rethrow_exception(failure);
  }

  std::size_t computed = 0;
  std::size_t cached = 0;

private:
  std::filesystem::path file_of(const SearchJob& job) const
  {
    return dir_ / (stable_hash(job.content.dump()) + ".json");
  }

  std::filesystem::path dir_;
  unsigned jobs_;
  ProgressLine progress_;
};

std::string optional_number(std::optional<double> value) { return value ? format_number(*value) : ""; }

std::vector<std::filesystem::path> draw_capacity_plot(const std::filesystem::path& out_dir,
                                                      const std::filesystem::path& csv, const RunOptions& options)
{
  std::filesystem::path python = options.python.empty() ? std::filesystem::path(MEMSIM_PYTHON) : options.python;
  std::filesystem::path script = options.plot_script.parent_path() / "plot_capacity.py";
  if (!std::filesystem::exists(python) || !std::filesystem::exists(script))
    throw RunError(fmt::format("cannot draw the capacity plot: {} or {} not found (run with --no-plots to skip it); "
                               "{} is complete",
                               python.string(), script.string(), csv.string()));
  const int status = wait_for_process(
      spawn_process({python.string(), script.string(), csv.string(), "--out", out_dir.string()}, std::nullopt));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw RunError(fmt::format("plotting failed: {} ended with {}; {} is complete", script.string(),
                               describe_status(status), csv.string()));
  return {out_dir / (std::string(kPlotCapacity) + ".png")};
}

std::string format_capacity_table(const std::vector<CapacityCell>& cells, const std::vector<CapacityOutcome>& outcomes)
{
  // Rows: workloads; columns: planners; one table per budget and bandwidth.
  std::vector<std::string> workloads, planners;
  for (const CapacityCell& cell : cells) {
    if (std::find(workloads.begin(), workloads.end(), cell.workload) == workloads.end())
      workloads.push_back(cell.workload);
    if (std::find(planners.begin(), planners.end(), cell.planner_label) == planners.end())
      planners.push_back(cell.planner_label);
  }
  std::map<std::pair<std::uint64_t, double>, std::map<std::pair<std::string, std::string>, std::string>> groups;
  std::vector<std::pair<std::uint64_t, double>> order;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const auto group = std::make_pair(cells[i].study.budget_bytes, cells[i].bandwidth.value_or(0));
    if (!groups.contains(group))
      order.push_back(group);
    const CapacityResult& search = outcomes[i].search;
    groups[group][{cells[i].workload, cells[i].planner_label}] =
        search.largest ? fmt::format("{}{}", format_number(axis_value(cells[i].study, *search.largest)),
                                     search.reached_limit ? "+" : "")
                       : "-";
  }
  std::string table;
  for (const auto& group : order) {
    table += fmt::format("largest {} at budget {}{}\n", to_string(cells.front().study.axis),
                         units::format_bytes(static_cast<double>(group.first)),
                         group.second > 0 ? fmt::format(", host link {:g} GB/s", group.second / 1e9) : "");
    std::size_t width = 8;
    for (const std::string& workload : workloads)
      width = std::max(width, workload.size());
    table += fmt::format("{:<{}}", "", width);
    for (const std::string& planner : planners)
      table += fmt::format("  {:>{}}", planner, std::max<std::size_t>(planner.size(), 6));
    table += "\n";
    for (const std::string& workload : workloads) {
      table += fmt::format("{:<{}}", workload, width);
      for (const std::string& planner : planners)
        table += fmt::format("  {:>{}}", groups[group][{workload, planner}], std::max<std::size_t>(planner.size(), 6));
      table += "\n";
    }
  }
  return table;
}

} // namespace

SearchSettings load_search_settings(const yaml_io::Node& node, const Experiment& experiment)
{
  node.only_keys({"axis", "axis_param", "step", "start", "limit", "scan", "min_throughput", "max_overhead"});
  SearchSettings settings;
  if (node.has("axis")) {
    const std::string text = node.at("axis").as_string();
    const std::optional<ScaleAxis> axis = scale_axis_from_string(text);
    if (!axis)
      node.at("axis").fail(fmt::format("unknown axis '{}' (valid: batch, width, depth, models)", text));
    settings.axis = *axis;
  }
  if (node.has("axis_param"))
    settings.axis_param = node.at("axis_param").as_string();
  if (node.has("step"))
    settings.axis_step = node.at("step").as_number();
  auto bounded = [&](const char* key, std::int64_t low, std::int64_t high, std::int64_t& field) {
    if (!node.has(key))
      return;
    const std::int64_t value = node.at(key).as_int();
    if (value < low || value > high)
      node.at(key).fail(fmt::format("{} must be between {} and {}, found {}", key, low, high, value));
    field = value;
  };
  bounded("start", 1, std::int64_t{1} << 40, settings.bounds.start);
  settings.bounds.limit = std::int64_t{1} << 16;
  bounded("limit", 1, std::int64_t{1} << 40, settings.bounds.limit);
  bounded("scan", 0, 1 << 20, settings.bounds.scan);
  if (settings.bounds.limit < settings.bounds.start)
    node.at("limit").fail(fmt::format("limit ({}) is below start ({})", settings.bounds.limit, settings.bounds.start));
  if (node.has("min_throughput")) {
    const double fraction = node.at("min_throughput").as_number();
    if (!(fraction > 0) || !std::isfinite(fraction))
      node.at("min_throughput").fail("min_throughput must be a positive fraction of keep-all's samples/s");
    settings.min_throughput = fraction;
  }
  if (node.has("max_overhead")) {
    const double limit = node.at("max_overhead").as_number();
    if (!(limit >= 1) || !std::isfinite(limit))
      node.at("max_overhead")
          .fail("max_overhead must be a time ratio >= 1 (2: at most twice keep-all's time with "
                "unlimited memory)");
    settings.max_overhead = limit;
  }
  for (const Workload& workload : experiment.workloads) {
    ScaleStudy study;
    // Only whether it is a trace matters here: an empty one stands for it.
    set_study_workload(study, workload, std::make_shared<const Trace>());
    try {
      set_axis(study, settings.axis, settings.axis_param);
    } catch (const InputError& error) {
      throw InputError(workload.where, fmt::format("workload '{}': {}", workload.name, error.message()));
    }
    try {
      set_axis_step(study, settings.axis_step);
    } catch (const InputError& error) {
      node.at("step").fail(fmt::format("workload '{}': {}", workload.name, error.message()));
    }
  }
  for (const BudgetChoice& budget : experiment.budgets)
    if (!budget.bytes)
      throw InputError(node.where(), "a search needs absolute budgets (sweep.budget: [8GiB, ...]): a fraction of the "
                                     "peak changes with the size searched");
  return settings;
}

std::vector<CapacityCell> expand_capacity_cells(const Experiment& experiment)
{
  const SearchSettings& settings = experiment.search.value();
  std::map<std::string, std::shared_ptr<const Trace>> recorded; // one copy of each recorded trace for all its cells
  for (const Workload& workload : experiment.workloads)
    if (workload.generator.is_null())
      recorded.emplace(workload.name, std::make_shared<const Trace>(workload.trace));
  std::vector<CapacityCell> cells;
  for_each_grid_point(experiment, [&](const GridPoint& point) {
    CapacityCell cell;
    cell.index = cells.size();
    cell.workload = point.workload.name;
    cell.planner_label = point.planner.label;
    cell.bandwidth = point.bandwidth;
    ScaleStudy& study = cell.study;
    set_study_workload(study, point.workload,
                       point.workload.generator.is_null() ? recorded.at(point.workload.name) : nullptr);
    set_axis(study, settings.axis, settings.axis_param);
    set_axis_step(study, settings.axis_step);
    study.planner = point.planner.name;
    study.planner_params = point.planner.params;
    study.machine = experiment.machine;
    if (point.bandwidth)
      study.machine.set_host_link_bandwidth(*point.bandwidth);
    study.budget_bytes = *point.budget.bytes;
    study.max_overhead = settings.max_overhead;
    study.simulation = experiment.simulation;
    study.simulation.engine = EngineKind::fast; // many simulations in one process
    study.simulation.record_timeline = false;
    cells.push_back(std::move(cell));
  });
  return cells;
}

CapacitySummary run_capacity_experiment(const Experiment& experiment, const std::filesystem::path& out_dir,
                                        const RunOptions& options)
{
  const SearchSettings& settings = experiment.search.value();
  const std::filesystem::path cache_dir = out_dir / "searches";
  create_output_folder(cache_dir);
  const unsigned jobs = options.jobs
                            ? options.jobs
                            : (experiment.jobs ? experiment.jobs : std::max(1u, std::thread::hardware_concurrency()));
  SearchRunner runner(cache_dir, jobs, options.progress);
  std::vector<CapacityCell> cells = expand_capacity_cells(experiment);

  // The throughput floors first: keep-all's largest batch for each workload, budget and bandwidth.
  std::vector<std::optional<double>> floors(cells.size());
  if (settings.min_throughput) {
    std::vector<SearchJob> floor_jobs;
    std::map<std::string, std::size_t> floor_of_key;
    std::vector<std::size_t> floor_index(cells.size());
    for (const CapacityCell& cell : cells) {
      ScaleStudy baseline = cell.study;
      set_axis(baseline, ScaleAxis::batch, "");
      baseline.planner = "keep-all";
      baseline.planner_params = Json::object();
      Json content = search_content(baseline, experiment, cell.bandwidth, settings.bounds, std::nullopt);
      auto [found, added] = floor_of_key.emplace(content.dump(), floor_jobs.size());
      if (added)
        floor_jobs.push_back(SearchJob{std::move(baseline), std::move(content), settings.bounds, std::nullopt});
      floor_index[cell.index] = found->second;
    }
    runner.run(floor_jobs, "throughput floors (keep-all)");
    for (const CapacityCell& cell : cells) {
      const CapacityResult& baseline = *floor_jobs[floor_index[cell.index]].result;
      if (!baseline.largest)
        throw InputError(experiment.source.string(),
                         fmt::format("min_throughput: keep-all trains no batch of workload '{}' at budget {}",
                                     cell.workload, units::format_bytes(static_cast<double>(cell.study.budget_bytes))));
      floors[cell.index] = *settings.min_throughput * find_probe(baseline, *baseline.largest)->outcome.samples_per_s;
    }
  }

  std::vector<SearchJob> jobs_to_run;
  for (CapacityCell& cell : cells) {
    cell.study.min_samples_per_s = floors[cell.index];
    Json content = search_content(cell.study, experiment, cell.bandwidth, settings.bounds, settings.min_throughput);
    jobs_to_run.push_back(SearchJob{cell.study, std::move(content), settings.bounds, std::nullopt});
  }
  runner.run(jobs_to_run, "capacity searches");

  std::vector<CapacityOutcome> outcomes;
  std::string csv = capacity_csv_header();
  for (const CapacityCell& cell : cells) {
    outcomes.push_back(CapacityOutcome{*jobs_to_run[cell.index].result, floors[cell.index]});
    csv += capacity_csv_row(cell, outcomes.back());
  }
  CapacitySummary summary;
  summary.cells = cells.size();
  summary.computed = runner.computed;
  summary.cached = runner.cached;
  summary.capacity_csv = out_dir / "capacity.csv";
  write_text_atomically(summary.capacity_csv, csv);
  if (options.table_output)
    fmt::print(options.table_output, "{}", format_capacity_table(cells, outcomes));
  if (options.plots)
    summary.plot_files = draw_capacity_plot(out_dir, summary.capacity_csv, options);
  return summary;
}

std::string capacity_csv_header()
{
  return "workload,planner,machine,budget_bytes,bandwidth_bytes_per_s,axis,axis_param,largest,reached_limit,"
         "iteration_time_s,samples_per_s,min_samples_per_s,probes\n";
}

std::string capacity_csv_row(const CapacityCell& cell, const CapacityOutcome& outcome)
{
  const CapacityResult& search = outcome.search;
  const Probe* best = search.largest ? find_probe(search, *search.largest) : nullptr;
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(cell.workload),
                     csv_field(cell.planner_label), csv_field(cell.study.machine.name), cell.study.budget_bytes,
                     optional_number(cell.bandwidth), to_string(cell.study.axis), cell.study.axis_param,
                     search.largest ? format_number(axis_value(cell.study, *search.largest)) : "",
                     search.reached_limit ? "true" : "false", best ? format_number(best->outcome.iteration_time_s) : "",
                     best ? format_number(best->outcome.samples_per_s) : "", optional_number(outcome.min_samples_per_s),
                     search.probes.size());
}

} // namespace memsim::experiments
