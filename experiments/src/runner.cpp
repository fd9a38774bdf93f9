#include "memsim/experiments/runner.hpp"

#include "memsim/common/atomic_file.hpp"
#include "memsim/experiments/processes.hpp"
#include "sweep_output.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/json_io.hpp"
#include "memsim/common/units.hpp"

#include <fmt/format.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

namespace memsim::experiments {
namespace {

volatile std::sig_atomic_t interrupt_signal = 0;

void on_interrupt(int signal) { interrupt_signal = signal; }

// Catches Ctrl-C / SIGTERM while the sweep runs so that finished cells stay cached and the run reports
// how to resume; restores the previous handlers afterwards. No SA_RESTART: waitpid must return EINTR.
class InterruptGuard {
public:
  InterruptGuard()
  {
    interrupt_signal = 0;
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;
    sigaction(SIGINT, &action, &previous_int_);
    sigaction(SIGTERM, &action, &previous_term_);
  }
  ~InterruptGuard()
  {
    sigaction(SIGINT, &previous_int_, nullptr);
    sigaction(SIGTERM, &previous_term_, nullptr);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

std::filesystem::path default_plot_script()
{
  std::filesystem::path root = MEMSIM_SOURCE_DIR;
  if (const char* dir = std::getenv("MEMSIM_DATA_DIR"))
    root = dir;
  return root / "experiments" / "plot" / "plot_results.py";
}

std::vector<std::filesystem::path> draw_plots(const std::vector<std::string>& kinds,
                                              const std::filesystem::path& out_dir, const std::filesystem::path& csv,
                                              const RunOptions& options)
{
  if (kinds.empty())
    return {};
  std::filesystem::path python = options.python.empty() ? std::filesystem::path(MEMSIM_PYTHON) : options.python;
  std::filesystem::path script = options.plot_script.empty() ? default_plot_script() : options.plot_script;
  if (!std::filesystem::exists(python))
    throw RunError(fmt::format("cannot draw plots: {} not found (install python3-matplotlib, or run with "
                               "--no-plots); {} is complete",
                               python.string(), csv.string()));
  if (!std::filesystem::exists(script))
    throw RunError(fmt::format("cannot draw plots: plot script {} not found (set MEMSIM_DATA_DIR, or run with "
                               "--no-plots); {} is complete",
                               script.string(), csv.string()));
  std::string plots;
  for (const auto& plot : kinds)
    plots += (plots.empty() ? "" : ",") + plot;
  pid_t pid =
      spawn_process({python.string(), script.string(), csv.string(), "--out", out_dir.string(), "--plots", plots},
                    std::nullopt);
  const int status = wait_for_process(pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw RunError(fmt::format("plotting failed: {} {} ended with {} (see its message above; run with --no-plots "
                               "to skip plots); {} is complete",
                               python.string(), script.string(), describe_status(status), csv.string()));
  std::vector<std::filesystem::path> files;
  for (const auto& plot : kinds)
    files.push_back(out_dir / (plot + ".png"));
  return files;
}

// The workers running now (pid -> cell key). Leaving the sweep by an exception (say the disk filled up) stops and
// reaps them, so that no worker outlives a runner that no longer waits for it.
class RunningWorkers {
public:
  RunningWorkers() = default;
  RunningWorkers(const RunningWorkers&) = delete;
  RunningWorkers& operator=(const RunningWorkers&) = delete;
  ~RunningWorkers()
  {
    for (const auto& [pid, key] : by_pid)
      ::kill(pid, SIGTERM);
    for (const auto& [pid, key] : by_pid)
      wait_for_process(pid);
  }
  std::map<pid_t, std::string> by_pid;
};

// A worker that found the disk full could not even write why into its log: say it for it.
std::string full_disk_note(const std::filesystem::path& folder)
{
  std::error_code error;
  const std::filesystem::space_info space = std::filesystem::space(folder, error);
  return !error && space.available == 0 ? fmt::format("\n  the file system of {} is full", folder.string()) : "";
}

std::string pad(const std::string& text, std::size_t width, bool right)
{
  if (text.size() >= width)
    return text;
  std::string spaces(width - text.size(), ' ');
  return right ? spaces + text : text + spaces;
}

} // namespace

std::optional<CellResult> read_cached(const std::filesystem::path& file, const Cell& cell)
{
  if (!std::filesystem::is_regular_file(file))
    return std::nullopt;
  try {
    json_io::Json document = json_io::read_file(file);
    Cell stored = cell_from_json(document.at("cell"), file.string());
    if (cell_key(stored) != cell_key(cell))
      return std::nullopt;
    return cell_result_from_json(document, file.string());
  } catch (const std::exception&) {
    return std::nullopt; // unreadable (e.g. an older format): recompute
  }
}

// results.csv, the table and the plots, from a result for every cell: the same bytes whether the cells ran here or
// on the shards of a cluster.
void write_results(const std::vector<std::string>& plots, const std::vector<Cell>& cells,
                   const std::vector<std::optional<CellResult>>& results, const std::filesystem::path& out_dir,
                   const RunOptions& options, std::chrono::steady_clock::time_point started, RunSummary& summary)
{
  std::vector<CellResult> complete;
  for (const auto& result : results)
    complete.push_back(*result);
  const bool iterations = has_several_iterations(complete);
  const bool batches = std::any_of(cells.begin(), cells.end(), [](const Cell& cell) { return cell.batch.has_value(); });
  const bool models = std::any_of(cells.begin(), cells.end(), [](const Cell& cell) { return cell.models.has_value(); });
  std::string table_text = csv_header(iterations, batches, models) + "\n";
  for (const Cell& cell : cells)
    table_text += csv_row(cell, complete[cell.index], iterations, batches, models) + "\n";
  const std::filesystem::path csv = out_dir / "results.csv";
  write_text_atomically(csv, table_text);
  summary.results_csv = csv;

  if (options.table_output != nullptr) {
    fmt::print(options.table_output, "{}", format_table(cells, complete));
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    fmt::print(options.table_output, "{} cells ({} run, {} cached) in {:.1f} s; results in {}\n", summary.cells,
               summary.computed, summary.cached, seconds, csv.string());
    std::fflush(options.table_output);
  }
  if (options.plots) {
    summary.plot_files = draw_plots(plots, out_dir, csv, options);
    if (options.table_output != nullptr && !summary.plot_files.empty()) {
      std::string names;
      for (const auto& file : summary.plot_files)
        names += (names.empty() ? "" : ", ") + file.string();
      fmt::print(options.table_output, "plots: {}\n", names);
    }
  }
}

std::string format_table(const std::vector<Cell>& cells, const std::vector<CellResult>& results)
{
  // One table per (workload, bandwidth), in the order of first appearance.
  std::vector<std::pair<std::string, double>> groups;
  for (const Cell& cell : cells) {
    std::pair<std::string, double> group{cell.workload, cell.bandwidth_bytes_per_s};
    if (std::find(groups.begin(), groups.end(), group) == groups.end())
      groups.push_back(group);
  }
  std::string text;
  for (const auto& [workload, bandwidth] : groups) {
    std::vector<std::string> planners;
    std::vector<std::pair<std::string, std::string>> budgets; // (header line 1, header line 2)
    std::map<std::pair<std::string, std::string>, std::string> entries;
    std::string machine;
    double ideal = 0;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const Cell& cell = cells[i];
      if (cell.workload != workload || cell.bandwidth_bytes_per_s != bandwidth)
        continue;
      machine = cell.machine;
      ideal = results[i].ideal_time_s;
      if (std::find(planners.begin(), planners.end(), cell.planner_label) == planners.end())
        planners.push_back(cell.planner_label);
      std::string bytes = units::format_bytes(static_cast<double>(cell.budget_bytes));
      std::pair<std::string, std::string> budget =
          cell.budget_fraction ? std::pair{fmt::format("{}x peak", format_number(*cell.budget_fraction)), bytes}
                               : std::pair{bytes, std::string()};
      if (std::find(budgets.begin(), budgets.end(), budget) == budgets.end())
        budgets.push_back(budget);
      entries[{cell.planner_label, budget.first}] =
          results[i].feasible ? units::format_duration(results[i].metrics.iteration_time_s) : "infeasible";
    }
    text += fmt::format("{} on {}, host link {} GB/s: iteration time (ideal {})\n", workload, machine,
                        format_number(bandwidth / 1e9), units::format_duration(ideal));
    std::size_t first_width = std::string("planner").size();
    for (const auto& planner : planners)
      first_width = std::max(first_width, planner.size());
    std::vector<std::size_t> widths;
    for (const auto& budget : budgets) {
      std::size_t width = std::max({budget.first.size(), budget.second.size(), std::string("infeasible").size()});
      for (const auto& planner : planners)
        width = std::max(width, entries[{planner, budget.first}].size());
      widths.push_back(width);
    }
    bool two_header_lines =
        std::any_of(budgets.begin(), budgets.end(), [](const auto& b) { return !b.second.empty(); });
    std::string header = pad("budget", first_width, false);
    std::string header2 = pad("", first_width, false);
    for (std::size_t b = 0; b < budgets.size(); ++b) {
      header += "  " + pad(budgets[b].first, widths[b], true);
      header2 += "  " + pad(budgets[b].second, widths[b], true);
    }
    text += header + "\n";
    if (two_header_lines)
      text += header2 + "\n";
    for (const auto& planner : planners) {
      std::string line = pad(planner, first_width, false);
      for (std::size_t b = 0; b < budgets.size(); ++b)
        line += "  " + pad(entries[{planner, budgets[b].first}], widths[b], true);
      text += line + "\n";
    }
    text += "\n";
  }
  return text;
}

RunSummary run_experiment(Experiment& experiment, const std::filesystem::path& out_dir, const RunOptions& options)
{
  const auto started = std::chrono::steady_clock::now();
  const std::filesystem::path cells_dir = out_dir / "cells";
  create_output_folder(cells_dir);
  remove_stale_temporaries(cells_dir);
  remove_stale_temporaries(out_dir);
  materialize_workloads(experiment, out_dir);
  const std::vector<Cell> cells = expand_cells(experiment);
  write_text_atomically(out_dir / kManifestName, sweep_manifest(experiment, cells, options.shard).dump(2) + "\n");

  RunSummary summary;
  const std::filesystem::path csv = out_dir / "results.csv";
  std::filesystem::remove(csv); // a stale table must not pass for this run's

  // Identical cells (same key) run once. A shard takes the cells whose index is I-1 modulo N.
  std::vector<std::optional<CellResult>> results(cells.size());
  std::map<std::string, std::vector<std::size_t>> cells_by_key;
  std::vector<std::string> pending_keys;
  for (const Cell& cell : cells) {
    if (!options.shard.owns(cell.index))
      continue;
    ++summary.cells;
    std::string key = cell_key(cell);
    auto& same = cells_by_key[key];
    same.push_back(cell.index);
    if (same.size() > 1)
      continue;
    if (auto cached = read_cached(cells_dir / (key + ".json"), cell)) {
      results[cell.index] = cached;
      continue;
    }
    pending_keys.push_back(key);
  }
  for (const auto& [key, indices] : cells_by_key)
    if (results[indices.front()])
      for (std::size_t index : indices) {
        results[index] = results[indices.front()];
        ++summary.cached;
      }

  unsigned jobs = options.jobs != 0 ? options.jobs : experiment.jobs;
  if (jobs == 0)
    jobs = std::max(1u, std::thread::hardware_concurrency());
  std::filesystem::path worker = options.worker_executable;
  if (worker.empty())
    worker = std::filesystem::read_symlink("/proc/self/exe");
  ProgressLine progress(options.progress);
  std::size_t done = summary.cached;
  auto show = [&](const Cell& cell) {
    progress.show(fmt::format("[{}/{}] {}", done, summary.cells, describe_cell(cell)));
  };

  InterruptGuard guard;
  RunningWorkers running;
  std::map<std::size_t, std::string> failures; // by cell index: reported in the sweep's order, not finish order
  std::size_t next = 0;
  while ((next < pending_keys.size() && interrupt_signal == 0) || !running.by_pid.empty()) {
    while (running.by_pid.size() < jobs && next < pending_keys.size() && interrupt_signal == 0) {
      const std::string& key = pending_keys[next++];
      const Cell& cell = cells[cells_by_key[key].front()];
      const std::filesystem::path cell_file = cells_dir / (key + ".cell.json");
      write_text_atomically(cell_file, cell_to_json(cell).dump(2) + "\n");
      pid_t pid = spawn_process({worker.string(), "worker", "--cell", cell_file.string(), "--out",
                                 (cells_dir / (key + ".json")).string()},
                                cells_dir / (key + ".log"));
      running.by_pid[pid] = key;
      show(cell);
    }
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) {
        if (interrupt_signal != 0) // workers got the terminal's SIGINT too; make sure they stop
          for (const auto& [child, key] : running.by_pid)
            ::kill(child, SIGTERM);
        continue;
      }
      throw RunError(fmt::format("waiting for workers failed: {}", std::strerror(errno)));
    }
    auto found = running.by_pid.find(pid);
    if (found == running.by_pid.end())
      continue; // not one of ours
    const std::string key = found->second;
    running.by_pid.erase(found);
    const std::vector<std::size_t>& indices = cells_by_key[key];
    const Cell& cell = cells[indices.front()];
    const std::filesystem::path log = cells_dir / (key + ".log");
    // Only a worker that exited normally has finished its cell: one killed by a signal may have been killed after
    // its result landed, but its cell is reported, not taken (a rerun reads the result if it is whole).
    std::optional<CellResult> result;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
      result = read_cached(cells_dir / (key + ".json"), cell);
    if (result) {
      for (std::size_t index : indices)
        results[index] = result;
      summary.computed += indices.size();
      done += indices.size();
      std::filesystem::remove(log);
    } else if (interrupt_signal == 0) {
      failures.emplace(cell.index, fmt::format("cell {} ({}) failed: worker ended with {}{}:\n    {}\n  log: {}{}",
                                               cell.index + 1, describe_cell(cell), describe_status(status),
                                               WIFEXITED(status) && WEXITSTATUS(status) == 0 ? " without a result" : "",
                                               log_tail(log), log.string(), full_disk_note(cells_dir)));
    }
    show(cell);
  }
  progress.clear();
  for (auto& [index, message] : failures)
    summary.failures.push_back(std::move(message));

  if (interrupt_signal != 0) {
    summary.interrupted = true;
    return summary;
  }
  if (!summary.failures.empty())
    return summary;
  if (options.shard.count > 1) { // the other shards' cells are elsewhere: `memsim merge` writes the results
    if (options.table_output != nullptr) {
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      fmt::print(options.table_output,
                 "shard {}/{}: {} of {} cells ({} run, {} cached) in {:.1f} s; in {}; merge the {} shard folders "
                 "with memsim merge\n",
                 options.shard.index, options.shard.count, summary.cells, cells.size(), summary.computed,
                 summary.cached, seconds, out_dir.string(), options.shard.count);
      std::fflush(options.table_output);
    }
    return summary;
  }
  write_results(experiment.plots, cells, results, out_dir, options, started, summary);
  return summary;
}

void run_worker(const std::filesystem::path& cell_file, const std::filesystem::path& result_file)
{
  const Cell cell = cell_from_json(json_io::read_file(cell_file), cell_file.string());
  // Beside the cell, KEY.state/: a worker killed in a long planner search (mu-two's ring near its largest N) leaves
  // its state there, and the rerun's worker resumes from it. A finished search removes its files, then the folder goes.
  std::string key = cell_file.filename().string();
  key = key.substr(0, key.find('.'));
  const std::filesystem::path state_dir = cell_file.parent_path() / (key + ".state");
  const CellResult result = run_cell(cell, state_dir);
  std::error_code ignored; // only an empty folder goes: a search that ended, refused or not, removed its files
  std::filesystem::remove(state_dir, ignored);
  write_text_atomically(result_file, cell_result_to_json(cell, result).dump(2) + "\n");
}

} // namespace memsim::experiments
