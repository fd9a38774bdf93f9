#include "memsim/experiments/validation_sweep.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/files.hpp"
#include "memsim/common/json_io.hpp"
#include "memsim/experiments/processes.hpp"
#include "memsim/experiments/runner.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/ledger.hpp"

#include <fmt/format.h>

#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>

namespace memsim::validation {
namespace {

namespace fs = std::filesystem;
using experiments::csv_field;
using experiments::log_tail;
using experiments::RunError;
using experiments::spawn_process;
using experiments::wait_for_process;

const char* const kKernels[] = {"spin", "gemm"};

} // namespace

fs::path default_python() { return MEMSIM_PYTHON; }

std::vector<PlannedCell> plan_cells(const experiments::Experiment& experiment)
{
  if (!experiment.bandwidths.empty())
    throw InputError(experiment.source.string(),
                     "a validation sweep runs on the machine as calibrated: remove the sweep's bandwidth axis");
  std::vector<PlannedCell> planned;
  for (const experiments::Cell& cell : experiments::expand_cells(experiment)) {
    PlannedCell entry;
    entry.cell = cell;
    entry.id = cell_id(cell.workload, cell.planner_label, cell.budget_bytes, cell.budget_fraction);
    const experiments::Workload* workload = nullptr;
    for (const auto& candidate : experiment.workloads)
      if (candidate.name == cell.workload)
        workload = &candidate;
    PlanRequest request;
    request.budget_bytes = cell.budget_bytes;
    request.devices = 1;
    request.params = cell.params;
    try {
      entry.plan = make_plan(cell.planner, workload->trace, experiment.machine, request);
    } catch (const Infeasible& error) {
      entry.infeasible = error.what();
    }
    planned.push_back(std::move(entry));
  }
  return planned;
}

std::vector<PlannedCell> prepare_sweep(experiments::Experiment& experiment, const fs::path& dir)
{
  fs::create_directories(dir / "workloads");
  fs::create_directories(dir / "plans");
  for (const experiments::Workload& workload : experiment.workloads)
    save_trace(workload.trace, dir / "workloads" / (workload.name + ".trace.json"));
  std::vector<PlannedCell> planned = plan_cells(experiment);
  std::string lines[2];
  for (const PlannedCell& entry : planned) {
    if (!entry.plan)
      continue;
    json_io::write_file(dir / "plans" / (entry.id + ".plan.json"), plan_to_json(*entry.plan));
    for (int k = 0; k < 2; ++k)
      lines[k] += fmt::format("{} {} {}\n", entry.id, entry.cell.workload, kKernels[k]);
  }
  write_text_file(dir / "cells.txt", lines[0] + lines[1]);
  return planned;
}

std::string sweep_csv_header()
{
  std::string header = "cell,workload,machine,planner,planner_name,budget_bytes,budget_fraction,plan_matches";
  for (const std::string& column : summary_csv_columns())
    header += "," + column;
  return header + "\n";
}

std::vector<fs::path> draw_validation_plots(const std::string& mode, const fs::path& dir, const fs::path& python,
                                            const fs::path& script, const std::vector<std::string>& extra_arguments)
{
  if (!fs::exists(python))
    throw RunError(fmt::format("cannot draw plots: {} not found (install python3-matplotlib, or use --no-plots)",
                               python.string()));
  if (!fs::exists(script))
    throw RunError(fmt::format("cannot draw plots: plot script {} not found (set MEMSIM_DATA_DIR, or use --no-plots)",
                               script.string()));
  std::vector<std::string> argv{python.string(), script.string(), mode, "--dir", dir.string()};
  argv.insert(argv.end(), extra_arguments.begin(), extra_arguments.end());
  const int status = wait_for_process(spawn_process(argv, std::nullopt));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw RunError(fmt::format("plotting failed: {} {} {} (see its message above; --no-plots skips plots)",
                               python.string(), script.string(), mode));
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".png")
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

SweepSummary validate_sweep(experiments::Experiment& experiment, const fs::path& measurements, const fs::path& out,
                            const SweepOptions& options)
{
  if (!fs::is_directory(measurements))
    throw InputError(measurements.string(), "measurements folder not found");
  fs::create_directories(out / "cells");
  experiments::materialize_workloads(experiment, out);
  SweepSummary summary;
  summary.cells = plan_cells(experiment);
  const std::vector<PlannedCell>& planned = summary.cells;
  struct Job {
    std::size_t planned_index;
    std::string kernels;
    fs::path plan_file;
    fs::path measured_file;
    fs::path dir;
    bool plan_matches = true;
  };
  std::vector<Job> jobs;
  for (std::size_t i = 0; i < planned.size(); ++i) {
    const PlannedCell& entry = planned[i];
    if (!entry.plan) {
      ++summary.planner_infeasible;
      continue;
    }
    // The plan that ran is the one to simulate; it should be the one planned here (deterministic planners).
    const fs::path ran_plan = measurements / (entry.id + ".plan.json");
    bool matches = true;
    fs::path plan_file = out / "cells" / (entry.id + ".plan.json");
    json_io::write_file(plan_file, plan_to_json(*entry.plan));
    if (fs::exists(ran_plan)) {
      const json_io::Json ran = json_io::read_file(ran_plan);
      matches = ran == plan_to_json(*entry.plan);
      plan_file = ran_plan;
    }
    bool any = false;
    for (const char* kernels : kKernels) {
      const fs::path measured = measurements / fmt::format("{}.{}.measured.json", entry.id, kernels);
      if (!fs::exists(measured))
        continue;
      any = true;
      jobs.push_back(Job{i, kernels, fs::absolute(plan_file), fs::absolute(measured),
                         out / "cells" / fmt::format("{}.{}", entry.id, kernels), matches});
    }
    if (!any)
      summary.unmeasured.push_back(entry.id);
  }

  // Each comparison simulates, so each runs in its own process (one SimGrid engine per process).
  const unsigned parallel = std::max(1u, options.jobs);
  std::map<pid_t, std::size_t> running;
  std::vector<bool> succeeded(jobs.size(), false);
  std::size_t next = 0;
  while (next < jobs.size() || !running.empty()) {
    while (next < jobs.size() && running.size() < parallel) {
      const Job& job = jobs[next];
      fs::create_directories(job.dir);
      const PlannedCell& entry = planned[job.planned_index];
      const pid_t pid = spawn_process({options.executable.string(), "validate", "--trace",
                                       entry.cell.trace_file.string(), "--machine", experiment.machine_file.string(),
                                       "--plan", job.plan_file.string(), "--measured", job.measured_file.string(),
                                       "--allocator", std::string(to_string(experiment.simulation.allocator)), "--out",
                                       job.dir.string(), "--no-plots", "--quiet"},
                                      job.dir / "log.txt");
      running[pid] = next++;
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR)
        continue;
      throw RunError(fmt::format("waitpid failed: {}", std::strerror(errno)));
    }
    auto found = running.find(pid);
    if (found == running.end())
      continue;
    const Job& job = jobs[found->second];
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
      succeeded[found->second] = true;
    else
      summary.failures.push_back(fmt::format("{} ({} kernels): {}", planned[job.planned_index].id, job.kernels,
                                             log_tail(job.dir / "log.txt")));
    running.erase(found);
  }

  std::string csv = sweep_csv_header();
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    if (!succeeded[j])
      continue;
    const Job& job = jobs[j];
    SweepRow row;
    row.cell = job.planned_index;
    row.kernels = job.kernels;
    row.plan_matches = job.plan_matches;
    const fs::path summary_file = job.dir / "summary.json";
    row.summary = summary_from_json(json_io::read_file(summary_file), summary_file.string());
    if (row.summary.kernels.empty())
      row.summary.kernels = job.kernels;
    const experiments::Cell& cell = planned[row.cell].cell;
    csv +=
        fmt::format("{},{},{},{},{},{},{},{}", planned[row.cell].id, csv_field(cell.workload), csv_field(cell.machine),
                    csv_field(cell.planner_label), csv_field(cell.planner), cell.budget_bytes,
                    cell.budget_fraction ? experiments::format_number(*cell.budget_fraction) : std::string(),
                    row.plan_matches ? "true" : "false");
    for (const std::string& value : summary_csv_values(row.summary))
      csv += "," + csv_field(value);
    csv += "\n";
    summary.rows.push_back(std::move(row));
  }
  summary.csv = out / "validation.csv";
  write_text_file(summary.csv, csv);
  if (!summary.failures.empty())
    return summary;
  if (options.plots && !summary.rows.empty())
    summary.plots = draw_validation_plots("sweep", out, options.python.empty() ? default_python() : options.python,
                                          options.plot_script, {"--measurements", fs::absolute(measurements).string()});
  return summary;
}

} // namespace memsim::validation
