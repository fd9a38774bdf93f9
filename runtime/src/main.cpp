// memsim-cuda: executes a memsim Plan on one real GPU and calibrates a Machine file from measurements.
// Exit codes: 0 success (an infeasible plan is a result: its timeline says so), 2 bad input (located
// message), 3 no CUDA device, 4 a CUDA error while running.
#include "calibrate_device.hpp"
#include "cublas_loader.hpp"
#include "cuda_check.hpp"
#include "cuda_executor.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/json_io.hpp"
#include "memsim/common/units.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/runtime/calibration.hpp"
#include "memsim/runtime/execution_program.hpp"
#include "memsim/runtime/kernel_sizing.hpp"
#include "memsim/runtime/measured_timeline.hpp"
#include "memsim/sim/timeline.hpp"
#include "memsim/traces/trace.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

namespace {

using namespace memsim;
using namespace memsim::runtime;

constexpr int kExitBadInput = 2;
constexpr int kExitNoDevice = 3;
constexpr int kExitCudaError = 4;

struct RunOptions {
  std::string trace;
  std::string plan;
  std::string kernels = "spin";
  std::size_t warmup = 2;
  std::size_t iterations = 5;
  std::string timeline;
  std::string perfetto;
  std::string raw_timings;
  double pool_slack = 0.25;
  std::string allocator = "bytes";
  bool dry_run = false;
  std::string device_memory; // dry run with budget 0
  int gpu = 0;
  std::string machine; // v2 host steps: the machine whose host speed times them (as `memsim simulate`)
};

struct AssembleOptions {
  std::string trace;
  std::string plan;
  std::string timings;
  std::string timeline;
  std::string perfetto;
};

struct CalibrateCliOptions {
  std::string out;
  std::string raw;
  std::string name;
  std::string max_transfer = "1GiB";
  std::string from_raw;
  int gpu = 0;
};

void write_json(const nlohmann::json& document, const std::string& path)
{
  std::ofstream out(path);
  if (!out)
    throw InputError(path, "cannot write this file");
  out << document.dump(1) << '\n';
}

void write_text(const std::string& text, const std::string& path)
{
  std::ofstream out(path);
  if (!out)
    throw InputError(path, "cannot write this file");
  out << text;
}

std::uint64_t parse_size_option(const std::string& text, const char* option)
{
  try {
    return units::parse_bytes(text);
  } catch (const std::invalid_argument& error) {
    throw InputError(option, error.what());
  }
}

// Pool sizing: the cap is the plan's budget (0: the GPU's memory), never above the GPU's memory; the arena
// adds `slack` for alignment and fragmentation, within what the GPU has free after `reserve`. `--allocator pool`
// makes the arena exactly the budget: the simulators' `--allocator pool`, the same fragmentation failures.
PoolConfig size_pool(std::uint64_t plan_budget, std::uint64_t gpu_total, std::uint64_t gpu_free, std::uint64_t reserve,
                     double slack, const std::string& allocator)
{
  PoolConfig pool;
  pool.budget_bytes = plan_budget == 0 ? gpu_total : std::min(plan_budget, gpu_total);
  const bool exact = allocator == "pool";
  const double wanted = exact ? static_cast<double>(pool.budget_bytes)
                              : static_cast<double>(pool.budget_bytes) * (1.0 + std::max(slack, 0.0)) + 1048576.0;
  const std::uint64_t available = gpu_free > reserve ? gpu_free - reserve : 0;
  pool.arena_bytes = std::min<std::uint64_t>(static_cast<std::uint64_t>(wanted), available);
  return pool;
}

struct LoadedPlan {
  Plan plan;
  Trace trace; // with the plan's extra ops and tensors
};

LoadedPlan load_plan_and_trace(const std::string& trace_path, const std::string& plan_path)
{
  const Trace base_trace = load_trace(trace_path);
  LoadedPlan loaded{load_plan(plan_path), {}};
  check_runtime_supports(loaded.plan, plan_path);
  validate_plan(loaded.plan, base_trace, std::numeric_limits<int>::max(), plan_path);
  loaded.trace = trace_with_extras(base_trace, loaded.plan);
  return loaded;
}

// Writes the timeline document and Perfetto trace, prints the summary.
void report(const Program& program, const Plan& plan, const std::vector<IterationTiming>& iterations,
            const RunInfo& info, const std::string& timeline, const std::string& perfetto)
{
  const nlohmann::json document = measured_timeline_document(program, iterations, info);
  const RunResult result = assemble_run_result(program, iterations[median_iteration(iterations)]);
  if (!timeline.empty())
    write_json(document, timeline);
  if (!perfetto.empty())
    write_json(to_perfetto(result, fmt::format("memsim-cuda {} ({})", info.gpu_name, info.kernels)), perfetto);

  const nlohmann::json& measured = document.at("measured");
  const Metrics& metrics = result.metrics;
  fmt::print("memsim-cuda: plan '{}' on {}: {} of {} steps on {} streams, {} kernels\n", plan.planner, info.gpu_name,
             program.steps.size(), plan.steps.size(), program.streams.size(), info.kernels);
  fmt::print("iteration time: median {:.6f} s (min {:.6f}, max {:.6f}) over {} iterations after {} warm-up\n",
             measured["iteration_time_s"]["median"].get<double>(), measured["iteration_time_s"]["min"].get<double>(),
             measured["iteration_time_s"]["max"].get<double>(), iterations.size(), info.warmup);
  fmt::print("compute busy {:.6f} s, stall {:.6f} s, recompute {:.6f} s, peak device bytes {}, h2d {} B, d2h {} B\n",
             metrics.compute_busy_s, metrics.stall_time_s, metrics.recompute_time_s, metrics.peak_device_bytes,
             metrics.h2d_bytes, metrics.d2h_bytes);
  fmt::print("event waits: {} from deps, {} for memory ordering; spin overhead {:.2f} us; host enqueue {:.3f} ms "
             "per iteration behind a {:.3f} ms gate\n",
             program.dependency_waits, program.memory_waits, info.spin_overhead_s * 1e6, info.enqueue_s * 1e3,
             info.enqueue_gate_s * 1e3);
  const nlohmann::json& error = measured["kernel_time_error"];
  if (info.kernels == "spin" && error["kernels"].get<std::size_t>() > 0)
    fmt::print("kernel time vs trace: median |error| {:.2f} us, max {:.2f} us, median relative {:.3f}%\n",
               error["median_abs_s"].get<double>() * 1e6, error["max_abs_s"].get<double>() * 1e6,
               error["median_relative"].get<double>() * 100);
  if (result.error)
    fmt::print("infeasible: {}\n", result.error->message);
  else
    fmt::print("feasible\n");
}

int run_command(const RunOptions& options)
{
  const LoadedPlan loaded = load_plan_and_trace(options.trace, options.plan);
  const Plan& plan = loaded.plan;
  const Trace& trace = loaded.trace;
  const Machine machine = options.machine.empty() ? Machine{} : load_machine(options.machine);
  if (options.kernels != "spin" && options.kernels != "gemm")
    throw InputError("--kernels", fmt::format("unknown kernels '{}' (valid: spin, gemm)", options.kernels));
  if (options.iterations == 0)
    throw InputError("--iterations", "at least one measured iteration");
  const GemmType gemm_type = gemm_type_for(trace.source.dtype);
  if (options.allocator != "bytes" && options.allocator != "pool")
    throw InputError("--allocator", fmt::format("unknown allocator '{}' (valid: bytes, pool)", options.allocator));

  if (options.dry_run) {
    std::uint64_t memory =
        options.device_memory.empty() ? 0 : parse_size_option(options.device_memory, "--device-memory");
    if (plan.budget_bytes == 0 && memory == 0)
      throw InputError("--device-memory",
                       "the plan's budget is 0 (the GPU's memory): give the GPU's memory for a dry run");
    if (memory == 0)
      memory = plan.budget_bytes;
    PoolConfig pool = size_pool(plan.budget_bytes, memory, std::numeric_limits<std::uint64_t>::max(), 0,
                                options.pool_slack, options.allocator);
    Program program = build_program(plan, trace, pool, machine);
    fmt::print("{}", describe_program(program));
    return 0;
  }

  std::string cublas_note;
  std::unique_ptr<CublasLibrary> cublas;
  const DeviceInfo device = open_device(options.gpu);
  std::uint64_t reserve = 512ull << 20; // context, events, cuBLAS workspaces
  if (options.kernels == "gemm") {
    cublas = CublasLibrary::open(cublas_note);
    if (!cublas)
      throw CudaError("--kernels gemm: " + cublas_note);
    for (const Op& op : trace.ops)
      if (op.flops)
        reserve =
            std::max<std::uint64_t>(reserve, (512ull << 20) + gemm_scratch_bytes(gemm_shape_for(*op.flops), gemm_type));
  }
  const PoolConfig pool = size_pool(plan.budget_bytes, device.total_bytes, device.free_bytes, reserve,
                                    options.pool_slack, options.allocator);
  Program program = build_program(plan, trace, pool, machine);
  std::fprintf(stderr, "%s", describe_program(program).c_str());

  ExecutorOptions executor;
  executor.kernels = options.kernels;
  executor.warmup = options.warmup;
  executor.iterations = options.iterations;
  executor.gemm_type = gemm_type;
  ExecutionOutcome outcome = execute_program(program, device, executor, cublas.get());
  if (outcome.spin_fallbacks > 0)
    std::fprintf(stderr, "memsim-cuda: %zu compute steps have no flops: they ran as spin kernels\n",
                 outcome.spin_fallbacks);
  if (!options.raw_timings.empty())
    write_json(raw_timings_to_json({pool, outcome.info, outcome.iterations}), options.raw_timings);
  report(program, plan, outcome.iterations, outcome.info, options.timeline, options.perfetto);
  return 0;
}

int assemble_command(const AssembleOptions& options)
{
  const LoadedPlan loaded = load_plan_and_trace(options.trace, options.plan);
  const RawTimings raw = raw_timings_from_json(json_io::read_file(options.timings), options.timings);
  const Program program = build_program(loaded.plan, loaded.trace, raw.pool);
  for (std::size_t i = 0; i < raw.iterations.size(); ++i)
    if (raw.iterations[i].size() != program.steps.size())
      throw InputError(fmt::format("{}: at /iterations/{}", options.timings, i),
                       fmt::format("{} step times for a program of {} steps: not this plan's run",
                                   raw.iterations[i].size(), program.steps.size()));
  report(program, loaded.plan, raw.iterations, raw.info, options.timeline, options.perfetto);
  return 0;
}

int calibrate_command(const CalibrateCliOptions& options)
{
  if (!options.from_raw.empty()) {
    // Rewrite the Machine file from earlier measurements: no GPU needed.
    CalibrationData data = calibration_from_json(json_io::read_file(options.from_raw), options.from_raw);
    std::string name = options.name.empty() ? std::filesystem::path(options.out).stem().string() : options.name;
    write_text(machine_yaml(data, name), options.out);
    fmt::print("memsim-cuda calibrate: {} (measured {}) -> {}\n", options.from_raw, data.gpu_name, options.out);
    return 0;
  }
  CalibrateOptions calibrate;
  calibrate.gpu = options.gpu;
  calibrate.max_transfer_bytes = parse_size_option(options.max_transfer, "--max-transfer");
  if (calibrate.max_transfer_bytes < 4096)
    throw InputError("--max-transfer", "at least 4KiB");
  std::string cublas_note;
  open_device(options.gpu); // no device: exit 3 before loading cuBLAS
  std::unique_ptr<CublasLibrary> cublas = CublasLibrary::open(cublas_note);
  if (!cublas)
    std::fprintf(stderr, "memsim-cuda calibrate: %s: peak FLOP/s not measured\n", cublas_note.c_str());
  CalibrationData data = calibrate_device(calibrate, cublas.get(), cublas_note);
  std::string name = options.name;
  if (name.empty())
    name = std::filesystem::path(options.out).stem().string();
  write_text(machine_yaml(data, name), options.out);
  std::string raw = options.raw;
  if (raw.empty())
    raw = (std::filesystem::path(options.out).replace_extension(".calibration.json")).string();
  write_json(calibration_to_json(data), raw);
  const HostLinkModel link = derive_host_link(data);
  fmt::print("memsim-cuda calibrate: {} -> {} (raw: {})\n", data.gpu_name, options.out, raw);
  fmt::print("host link: H2D {:.2f} GB/s, D2H {:.2f} GB/s, latency {:.2f} us, overlap {:.2f}x ({})\n",
             link.h2d_bytes_per_s / 1e9, link.d2h_bytes_per_s / 1e9, link.latency_s * 1e6, link.overlap_factor,
             link.duplex_split ? "split" : "shared");
  fmt::print("kernel launch {:.2f} us back to back ({:.2f} us alone between events), HBM copy {:.1f} GB/s\n",
             data.back_to_back_kernel_s * 1e6, data.empty_kernel_s * 1e6, data.hbm_bytes_per_s / 1e9);
  for (const auto& [dtype, rate] : data.peak_flops)
    fmt::print("GEMM {}: {:.1f} TFLOP/s\n", dtype, rate / 1e12);
  return 0;
}

} // namespace

int main(int argc, char** argv)
{
  CLI::App app{"memsim-cuda: run a memsim plan on a real GPU, or calibrate a machine file"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "memsim-cuda 0.1.0");

  RunOptions run;
  CLI::App* run_app = app.add_subcommand("run", "execute a plan on the GPU and write the measured timeline");
  run_app->add_option("--trace", run.trace, "trace JSON (memsim-trace)")->required();
  run_app->add_option("--plan", run.plan, "plan JSON (memsim-plan)")->required();
  run_app->add_option("--kernels", run.kernels, "spin: busy kernels of the trace time; gemm: cuBLAS of the op's flops")
      ->capture_default_str();
  run_app->add_option("--warmup", run.warmup, "warm-up iterations")->capture_default_str();
  run_app->add_option("--iterations", run.iterations, "measured iterations")->capture_default_str();
  run_app->add_option("--timeline", run.timeline, "write the measured timeline JSON (the simulator's document)");
  run_app->add_option("--perfetto", run.perfetto, "write a Chrome/Perfetto trace of the median iteration");
  run_app->add_option("--raw-timings", run.raw_timings, "write every iteration's event times (for `assemble`)");
  run_app->add_option("--pool-slack", run.pool_slack, "extra arena beyond the budget for alignment/fragmentation")
      ->capture_default_str();
  run_app
      ->add_option("--allocator", run.allocator,
                   "bytes: arena = budget + --pool-slack; pool: arena = budget (the simulators' --allocator pool)")
      ->capture_default_str();
  run_app->add_flag("--dry-run", run.dry_run, "build streams, waits and allocations only (no GPU needed)");
  run_app->add_option("--device-memory", run.device_memory, "dry run: the GPU's memory when the budget is 0");
  run_app->add_option("--gpu", run.gpu, "CUDA device index")->capture_default_str();
  run_app->add_option("--machine", run.machine,
                      "machine YAML whose host speed times host steps (device -1) without cpu_time_s");

  AssembleOptions assemble;
  CLI::App* assemble_app =
      app.add_subcommand("assemble", "rebuild the timeline of a run from its --raw-timings (no GPU needed)");
  assemble_app->add_option("--trace", assemble.trace, "trace JSON the run used")->required();
  assemble_app->add_option("--plan", assemble.plan, "plan JSON the run used")->required();
  assemble_app->add_option("--timings", assemble.timings, "the run's --raw-timings file")->required();
  assemble_app->add_option("--timeline", assemble.timeline, "write the measured timeline JSON");
  assemble_app->add_option("--perfetto", assemble.perfetto, "write a Chrome/Perfetto trace of the median iteration");

  CalibrateCliOptions calibrate;
  CLI::App* calibrate_app = app.add_subcommand("calibrate", "measure the GPU and write a memsim-machine YAML");
  calibrate_app->add_option("--out", calibrate.out, "machine YAML to write")->required();
  calibrate_app->add_option("--raw", calibrate.raw, "raw measurements JSON (default: <out>.calibration.json)");
  calibrate_app->add_option("--name", calibrate.name, "machine name (default: the file's stem)");
  calibrate_app->add_option("--max-transfer", calibrate.max_transfer, "largest transfer size")->capture_default_str();
  calibrate_app->add_option("--gpu", calibrate.gpu, "CUDA device index")->capture_default_str();
  calibrate_app->add_option("--from-raw", calibrate.from_raw,
                            "write the YAML from an earlier run's raw JSON instead of measuring (no GPU needed)");

  try {
    app.parse(argc, argv);
    if (*run_app)
      return run_command(run);
    if (*assemble_app)
      return assemble_command(assemble);
    return calibrate_command(calibrate);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? 0 : kExitBadInput;
  } catch (const InputError& error) {
    fmt::print(stderr, "memsim-cuda: {}\n", error.what());
    return kExitBadInput;
  } catch (const NoCudaDevice& error) {
    fmt::print(stderr, "memsim-cuda: no CUDA device found ({})\n", error.what());
    return kExitNoDevice;
  } catch (const CudaError& error) {
    fmt::print(stderr, "memsim-cuda: CUDA error: {}\n", error.what());
    return kExitCudaError;
  } catch (const std::exception& error) {
    fmt::print(stderr, "memsim-cuda: internal error: {}\n", error.what());
    return kExitCudaError;
  }
}
