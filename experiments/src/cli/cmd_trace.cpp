// memsim trace info|decisions|plot|rescale: look at a trace (counts, bytes by kind, default-schedule peak; memory over
// the iteration), or rescale it to another batch size and GPU.
#include "commands.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/rescale.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/decisions.hpp"
#include "memsim/traces/summary.hpp"
#include "memsim/traces/views.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <fstream>
#include <memory>

extern char** environ;

namespace memsim::cli {
namespace {

struct TraceOptions {
  std::string trace;
  bool json = false;
  std::string out;
  std::string title;
  bool keep_data = false;
  std::int64_t batch = 0;
  std::string gpu;
};

// The memory curve under the default schedule: one row per op (start and end time, bytes while it runs).
void write_profile_csv(const Trace& trace, const std::filesystem::path& path)
{
  const MemoryProfile profile = default_memory_profile(trace);
  std::ofstream out(path, std::ios::trunc);
  if (!out)
    throw InputError(path.string(), "cannot write file");
  out << "op,phase,layer,start_s,end_s,bytes_in_use\n";
  double clock = 0;
  for (const Op& op : trace.ops) {
    out << fmt::format("{},{},{},{:.9g},{:.9g},{}\n", op.id, to_string(op.phase), op.layer, clock, clock + op.time_s,
                       profile.in_use_during[static_cast<std::size_t>(op.id)]);
    clock += op.time_s;
  }
  if (!out)
    throw InputError(path.string(), "write failed");
}

int run_python(const std::vector<std::string>& arguments)
{
  std::vector<char*> argv;
  for (const auto& argument : arguments)
    argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0)
    return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

} // namespace

void add_trace_command(CLI::App& app, Context& context)
{
  CLI::App* trace = app.add_subcommand("trace", "Look at a trace (summary, memory plot) or rescale it");
  trace->require_subcommand(1);
  auto options = std::make_shared<TraceOptions>();

  CLI::App* info = trace->add_subcommand(
      "info",
      "Ops, tensors by kind, total_time_s, default_peak_bytes (default schedule), activation bytes, chain view");
  info->add_option("TRACE", options->trace, "trace file (.trace.json or .trace.json.gz)")->required();
  info->add_flag("--json", options->json, "one JSON object with the same names");
  info->callback([options] {
    const Trace loaded = load_trace(options->trace);
    const TraceSummary summary = summarize_trace(loaded, default_memory_profile(loaded));
    if (options->json)
      fmt::print("{}\n", summary_to_json(summary).dump(1));
    else
      fmt::print("{}", format_summary(summary));
  });

  CLI::App* decisions = trace->add_subcommand(
      "decisions", "A dynamic trace's control-flow decisions: Jaccard distance between iterations (DyNN-Offload "
                   "Table I: to iteration 0, in five bins; and to the previous iteration)");
  decisions->add_option("TRACE", options->trace, "trace file with `decisions` (memsim gen var-lstm|treelstm|moe)")
      ->required();
  decisions->add_flag("--json", options->json, "one JSON object");
  decisions->callback([options] {
    const DecisionSummary summary = summarize_decisions(load_trace(options->trace), options->trace);
    if (options->json)
      fmt::print("{}\n", decision_summary_to_json(summary).dump(1));
    else
      fmt::print("{}", format_decision_summary(summary));
  });

  CLI::App* plot = trace->add_subcommand("plot", "Memory in use over the iteration under the default schedule (PNG)");
  plot->add_option("TRACE", options->trace, "trace file (.trace.json or .trace.json.gz)")->required();
  plot->add_option("--out", options->out, "PNG to write")->required();
  plot->add_option("--title", options->title, "plot title (default: the trace's name and source)");
  plot->add_flag("--keep-data", options->keep_data, "keep the CSV the plot was drawn from (OUT.csv)");
  plot->callback([options, &context] {
    const Trace loaded = load_trace(options->trace);
    const std::filesystem::path out = options->out;
    if (out.has_parent_path())
      std::filesystem::create_directories(out.parent_path());
    const std::filesystem::path csv = out.string() + ".csv";
    write_profile_csv(loaded, csv);
    const std::filesystem::path script = data_dir() / "traces" / "tools" / "plot_trace_memory.py";
    const std::filesystem::path python = MEMSIM_PYTHON;
    if (!std::filesystem::exists(python) || !std::filesystem::exists(script)) {
      fmt::print(stderr,
                 "memsim: trace plot: needs {} and {} (python3-matplotlib; set MEMSIM_DATA_DIR); the data is "
                 "in {}\n",
                 python.string(), script.string(), csv.string());
      context.exit_code = 3;
      return;
    }
    const TraceSummary summary = summarize_trace(loaded, default_memory_profile(loaded));
    std::string title = options->title;
    if (title.empty())
      title = fmt::format("{} ({}, batch {}): default schedule, peak {:.2f} GiB", loaded.name,
                          loaded.source.device.empty() ? "unknown device" : loaded.source.device, loaded.source.batch,
                          static_cast<double>(summary.default_peak_bytes) / (1024.0 * 1024 * 1024));
    int code = run_python({python.string(), script.string(), csv.string(), "--out", out.string(), "--title", title,
                           "--resident", std::to_string(summary.resident_bytes)});
    if (!options->keep_data)
      std::filesystem::remove(csv);
    if (code != 0) {
      fmt::print(stderr, "memsim: trace plot: {} failed (exit {})\n", script.string(), code);
      context.exit_code = 3;
      return;
    }
    fmt::print("{}: default-schedule memory of {} ops, peak {} bytes\n", out.string(), loaded.ops.size(),
               summary.default_peak_bytes);
  });

  CLI::App* rescale = trace->add_subcommand(
      "rescale", "The trace at another batch size (and GPU): batch-proportional tensors, workspace, flops, bytes and "
                 "op times through the cost model (traces/src/RESCALING.md); weights and optimizer state unchanged");
  rescale->add_option("TRACE", options->trace, "trace file (.trace.json or .trace.json.gz)")->required();
  rescale->add_option("--batch", options->batch, "the new batch size (the trace's source.batch must be known)")
      ->required();
  rescale->add_option("--gpu", options->gpu,
                      "a machine preset or file whose first GPU runs the rescaled trace (default: the recording GPU)");
  rescale->add_option("--out", options->out, "trace to write (.trace.json, or .trace.json.gz to compress)")->required();
  rescale->callback([options] {
    if (options->batch <= 0)
      throw InputError("--batch", fmt::format("batch {} must be positive", options->batch));
    const Trace loaded = load_trace(options->trace);
    std::optional<Gpu> target;
    if (!options->gpu.empty())
      target = load_machine_or_preset(options->gpu, default_presets_dir()).gpus.at(0);
    const Trace scaled = rescale_trace(loaded, options->batch, target, options->trace);
    const std::filesystem::path out = options->out;
    if (out.has_parent_path())
      std::filesystem::create_directories(out.parent_path());
    save_trace(scaled, out);
    const MemoryProfile before = default_memory_profile(loaded);
    const MemoryProfile after = default_memory_profile(scaled);
    fmt::print("{}: batch {} -> {} on {}: compute {:.6g} s -> {:.6g} s, default-schedule peak {} -> {} bytes\n",
               out.string(), loaded.source.batch, scaled.source.batch, scaled.source.device, loaded.total_time_s(),
               scaled.total_time_s(), before.peak_bytes, after.peak_bytes);
  });
}

} // namespace memsim::cli
