// memsim-bench: simulator throughput on a generated chain with an offload and a prefetch per layer.
//
//   parse        load_trace + load_plan (simdjson) against the v1 loader (nlohmann, nlohmann_baseline.cpp)
//   end to end   what `memsim simulate --json` does: load both files, simulate (SimGrid or fast engine), write
//                the metrics object; SimGrid activities per second
//   raw SimGrid  the same number of activities issued by three bare stream actors (exec, send, send) with no
//                memsim logic: the rate the end-to-end runs are measured against
//
// Each measurement runs in its own child process (one SimGrid engine per process), `--repeat` times; the fastest
// run counts (other work on the machine only ever adds time).
#include "nlohmann_baseline.hpp"

#include "memsim/common/files.hpp"
#include "memsim/common/units.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/hwmodels/platform.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/traces/trace.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <tuple>

namespace memsim {
namespace {

constexpr std::uint64_t kActivationBytes = 1 << 20;
constexpr double kForwardSeconds = 100e-6;

Machine bench_machine()
{
  Machine machine;
  machine.name = "bench-pcie3";
  machine.gpus.push_back(Gpu{"gpu0", "bench-gpu", 32ull << 30, {{"fp32", 14e12}}, 900e9, 0});
  machine.host.memory = 1ull << 40;
  machine.links.push_back(Link{"pcie", "gpu0", "host", 12e9, 1e-6, Duplex::split});
  return machine;
}

// x -> f1 -> a1 -> ... -> fL -> aL -> loss -> gL -> bL -> ... -> b1 -> g0, one weight w read by every op.
Trace chain_trace(int layers)
{
  Trace trace;
  trace.name = fmt::format("bench-chain-{}", layers);
  trace.source = TraceSource{"memsim-bench", "bench-gpu", "fp32", 1, ""};
  auto tensor = [&](std::string name, std::uint64_t bytes, TensorKind kind) {
    trace.tensors.push_back(
        Tensor{static_cast<TensorId>(trace.tensors.size()), std::move(name), bytes, kind, {}, {}, {}});
    return trace.tensors.back().id;
  };
  auto op = [&](std::string name, Phase phase, int layer, std::vector<TensorId> inputs, TensorId output,
                double seconds) {
    Op o;
    o.id = static_cast<OpId>(trace.ops.size());
    o.name = std::move(name);
    o.type = "linear";
    o.phase = phase;
    o.layer = layer;
    o.inputs = std::move(inputs);
    o.outputs = {output};
    o.time_s = seconds;
    trace.ops.push_back(std::move(o));
  };
  const TensorId w = tensor("w", 4096, TensorKind::weight);
  std::vector<TensorId> activations{tensor("x", kActivationBytes, TensorKind::input)};
  for (int l = 1; l <= layers; ++l) {
    activations.push_back(tensor(fmt::format("a{}", l), kActivationBytes, TensorKind::activation));
    op(fmt::format("f{}", l), Phase::forward, l, {activations[static_cast<std::size_t>(l - 1)], w}, activations.back(),
       kForwardSeconds);
  }
  TensorId gradient = tensor(fmt::format("g{}", layers), kActivationBytes, TensorKind::gradient);
  op("loss", Phase::loss, layers, {activations.back()}, gradient, kForwardSeconds);
  for (int l = layers; l >= 1; --l) {
    const TensorId next = tensor(fmt::format("g{}", l - 1), kActivationBytes, TensorKind::gradient);
    op(fmt::format("b{}", l), Phase::backward, l, {gradient, activations[static_cast<std::size_t>(l - 1)], w}, next,
       2 * kForwardSeconds);
    gradient = next;
  }
  return trace;
}

// Every activation a1..a(L-1) is offloaded after its producer, freed once its consumer ran, and prefetched one
// layer ahead of the backward op that reads it.
Plan chain_plan(const Trace& trace, int layers)
{
  Plan plan;
  plan.trace = trace.name;
  plan.machine = "bench-pcie3";
  plan.planner = "memsim-bench";
  PlanBuilder build(plan);
  auto activation = [](int l) { return static_cast<TensorId>(l + 1); }; // tensor 0 is w, 1 is x
  const OpId loss = layers;
  std::vector<StepId> forward(static_cast<std::size_t>(layers + 1), -1),
      freed(static_cast<std::size_t>(layers + 1), -1);
  std::vector<StepId> offload(static_cast<std::size_t>(layers + 1), -1);
  for (int l = 1; l <= layers; ++l) {
    forward[static_cast<std::size_t>(l)] = build.compute(l - 1);
    if (l >= 2 && l - 1 < layers) // a(l-1) was read by f(l): its device copy can go
      freed[static_cast<std::size_t>(l - 1)] =
          build.free(activation(l - 1),
                     {offload[static_cast<std::size_t>(l - 1)], forward[static_cast<std::size_t>(l)]}, "d2h");
    if (l < layers)
      offload[static_cast<std::size_t>(l)] = build.offload(activation(l), {forward[static_cast<std::size_t>(l)]});
  }
  StepId previous = build.compute(loss);
  build.free(activation(layers));
  std::vector<StepId> prefetched(static_cast<std::size_t>(layers + 1), -1);
  auto prefetch = [&](int l, StepId after) {
    if (l >= 1 && l < layers)
      prefetched[static_cast<std::size_t>(l)] =
          build.prefetch(activation(l), {freed[static_cast<std::size_t>(l)], after});
  };
  prefetch(layers - 1, previous);
  TensorId gradient = static_cast<TensorId>(layers + 2);
  for (int l = layers; l >= 1; --l) {
    prefetch(l - 2, previous);
    std::vector<StepId> deps;
    if (l - 1 >= 1)
      deps.push_back(prefetched[static_cast<std::size_t>(l - 1)]);
    const OpId backward = static_cast<OpId>(layers + 1 + (layers - l));
    previous = build.compute(backward, deps);
    build.free(gradient);
    if (l - 1 >= 1)
      build.free(activation(l - 1));
    gradient = trace.op(backward).outputs[0];
  }
  build.free(gradient);
  return plan;
}

// Runs `body` in a child process and returns what it printed to the pipe.
std::string in_child(const std::function<std::string()>& body)
{
  int ends[2];
  if (::pipe(ends) != 0)
    throw std::runtime_error("pipe failed");
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(ends[0]);
    std::string text;
    try {
      text = body();
    } catch (const std::exception& error) {
      text = std::string("error: ") + error.what();
    }
    [[maybe_unused]] const ssize_t written = ::write(ends[1], text.data(), text.size());
    ::_exit(0);
  }
  ::close(ends[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(ends[0], buffer, sizeof buffer)) > 0;)
    text.append(buffer, static_cast<std::size_t>(n));
  ::close(ends[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (text.rfind("error: ", 0) == 0)
    throw std::runtime_error(text);
  return text;
}

double seconds_since(std::chrono::steady_clock::time_point start)
{
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Three bare actors on the bench machine: `activities / 3` execs, sends and receives-direction sends each.
double raw_simgrid_seconds(std::size_t activities)
{
  const Machine machine = bench_machine();
  std::vector<std::string> arguments{"memsim-bench", "--log=root.thres:critical"};
  std::vector<char*> argv;
  for (auto& argument : arguments)
    argv.push_back(argument.data());
  int argc = static_cast<int>(argv.size());
  const auto start = std::chrono::steady_clock::now();
  simgrid::s4u::Engine engine(&argc, argv.data());
  const SimPlatform platform = build_platform(engine, machine);
  const std::size_t each = activities / 3;
  simgrid::s4u::Actor::create("compute", platform.gpu_hosts[0], [each] {
    for (std::size_t i = 0; i < each; ++i)
      simgrid::s4u::this_actor::execute(kForwardSeconds * SimPlatform::kSimSpeed);
  });
  simgrid::s4u::Actor::create("d2h", platform.gpu_hosts[0], [&platform, each] {
    for (std::size_t i = 0; i < each; ++i)
      simgrid::s4u::Comm::sendto(platform.gpu_hosts[0], platform.host, kActivationBytes);
  });
  simgrid::s4u::Actor::create("h2d", platform.gpu_hosts[0], [&platform, each] {
    for (std::size_t i = 0; i < each; ++i)
      simgrid::s4u::Comm::sendto(platform.host, platform.gpu_hosts[0], kActivationBytes);
  });
  engine.run();
  return seconds_since(start);
}

// One end-to-end run, as `memsim simulate --json --engine E` does it: load the trace and the plan, simulate, write
// the metrics object to a file. Times each stage.
nlohmann::json end_to_end(const std::filesystem::path& trace_file, const std::filesystem::path& plan_file,
                          const std::filesystem::path& metrics_file, EngineKind engine)
{
  const auto start = std::chrono::steady_clock::now();
  const Trace trace = load_trace(trace_file);
  const double parse_trace_s = seconds_since(start);
  const auto plan_start = std::chrono::steady_clock::now();
  const Plan plan = load_plan(plan_file);
  const double parse_plan_s = seconds_since(plan_start);
  const auto simulate_start = std::chrono::steady_clock::now();
  SimOptions options;
  options.record_timeline = false;
  options.engine = engine;
  const RunResult result = simulate(trace, bench_machine(), plan, options);
  const double simulate_s = seconds_since(simulate_start);
  const auto write_start = std::chrono::steady_clock::now();
  write_text_file(metrics_file, metrics_to_json(result).dump() + "\n");
  const double write_s = seconds_since(write_start);
  return nlohmann::json{{"parse_s", parse_trace_s + parse_plan_s},
                        {"parse_trace_s", parse_trace_s},
                        {"parse_plan_s", parse_plan_s},
                        {"simulate_s", simulate_s},
                        {"write_s", write_s},
                        {"total_s", seconds_since(start)},
                        {"feasible", result.metrics.feasible},
                        {"steps_executed", result.metrics.steps_executed},
                        {"simulated_iteration_s", result.metrics.iteration_time_s},
                        {"error", result.error ? result.error->message : ""}};
}

// The v1 loader (nlohmann) on the same files.
nlohmann::json baseline_parse(const std::filesystem::path& trace_file, const std::filesystem::path& plan_file)
{
  const auto start = std::chrono::steady_clock::now();
  const Trace trace = bench::nlohmann_load_trace(trace_file);
  const double parse_trace_s = seconds_since(start);
  const auto plan_start = std::chrono::steady_clock::now();
  const Plan plan = bench::nlohmann_load_plan(plan_file);
  const double parse_plan_s = seconds_since(plan_start);
  return nlohmann::json{{"parse_s", parse_trace_s + parse_plan_s},
                        {"parse_trace_s", parse_trace_s},
                        {"parse_plan_s", parse_plan_s},
                        {"steps", plan.steps.size()},
                        {"ops", trace.ops.size()}};
}

// The run of `repeat` (each in its own process) with the smallest `key`: the machine is shared, noise only adds.
nlohmann::json best_of(int repeat, const char* key, const std::function<nlohmann::json()>& body)
{
  nlohmann::json best;
  for (int i = 0; i < repeat; ++i) {
    nlohmann::json run = nlohmann::json::parse(in_child([&] { return body().dump(); }));
    if (best.is_null() || run[key].get<double>() < best[key].get<double>())
      best = std::move(run);
  }
  return best;
}

bool ran_through(const nlohmann::json& run, std::size_t steps)
{
  return run["feasible"].get<bool>() && run["steps_executed"].get<std::size_t>() == steps;
}

} // namespace
} // namespace memsim

int main(int argc, char** argv)
{
  using namespace memsim;
  CLI::App app("memsim-bench: a generated chain with an offload and a prefetch per layer: parse time (simdjson "
               "loader vs the v1 nlohmann loader), end to end `simulate` (load + simulate + write the metrics) with "
               "the SimGrid and the fast engine, and the raw SimGrid activity rate they are compared with");
  int layers = 15000;
  int repeat = 3;
  std::string work_dir = std::filesystem::temp_directory_path() / "memsim-bench";
  bool json = false;
  app.add_option("--layers", layers, "chain layers (about 7 plan steps each)")->check(CLI::Range(2, 10000000));
  app.add_option("--repeat", repeat, "runs of each measurement (each in its own process); the fastest counts")
      ->check(CLI::Range(1, 100));
  app.add_option("--work-dir", work_dir, "where the generated trace and plan are written");
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);

  try {
    std::filesystem::create_directories(work_dir);
    const auto trace_file = std::filesystem::path(work_dir) / "chain.trace.json";
    const auto plan_file = std::filesystem::path(work_dir) / "chain.plan.json";
    const auto metrics_file = std::filesystem::path(work_dir) / "metrics.json";
    // Written by a child too: the measured children are forked from this process, and a parent that held the
    // generated documents would hand them a heap of shared pages that fault again when written.
    const nlohmann::json generated = nlohmann::json::parse(in_child([&] {
      const Trace trace = chain_trace(layers);
      const Plan plan = chain_plan(trace, layers);
      save_trace(trace, trace_file);
      save_plan(plan, plan_file);
      // The simulator issues one SimGrid activity per compute/offload/prefetch step; frees are bookkeeping only.
      std::size_t activities = 0;
      for (const Step& step : plan.steps)
        activities += step.kind != StepKind::free;
      return nlohmann::json{{"steps", plan.steps.size()}, {"activities", activities}}.dump();
    }));
    const auto steps = generated["steps"].get<std::size_t>();
    const auto activities = generated["activities"].get<std::size_t>();

    const nlohmann::json baseline = best_of(repeat, "parse_s", [&] { return baseline_parse(trace_file, plan_file); });
    const nlohmann::json simgrid = best_of(repeat, "total_s", [&] {
      return end_to_end(trace_file, plan_file, metrics_file, EngineKind::simgrid);
    });
    const nlohmann::json fast =
        best_of(repeat, "total_s", [&] { return end_to_end(trace_file, plan_file, metrics_file, EngineKind::fast); });
    const nlohmann::json raw = best_of(repeat, "raw_s", [&] {
      return nlohmann::json{{"raw_s", raw_simgrid_seconds(activities)}};
    });
    for (const nlohmann::json* run : {&simgrid, &fast})
      if (!ran_through(*run, steps)) {
        fmt::print(stderr, "memsim-bench: the benchmark plan did not run through: {}\n", run->dump());
        return 1;
      }

    const double raw_s = raw["raw_s"].get<double>();
    // The parse time is the faster of the two end-to-end runs' (same loader, same files).
    const double parse_s = std::min(simgrid["parse_s"].get<double>(), fast["parse_s"].get<double>());
    const double raw_rate = static_cast<double>(activities) / raw_s;
    const double simgrid_rate = static_cast<double>(activities) / simgrid["total_s"].get<double>();
    const double fast_rate = static_cast<double>(activities) / fast["total_s"].get<double>();
    const nlohmann::json report = {{"layers", layers},
                                   {"plan_steps", steps},
                                   {"simgrid_activities", activities},
                                   {"repeat", repeat},
                                   {"parse_nlohmann", baseline},
                                   {"end_to_end_simgrid", simgrid},
                                   {"end_to_end_fast", fast},
                                   {"raw_simgrid_s", raw_s},
                                   {"raw_simgrid_activities_per_s", raw_rate},
                                   {"parse_speedup", baseline["parse_s"].get<double>() / parse_s},
                                   {"simgrid_vs_raw", simgrid_rate / raw_rate},
                                   {"fast_vs_raw", fast_rate / raw_rate}};
    if (json) {
      fmt::print("{}\n", report.dump());
      return 0;
    }
    fmt::print("chain of {} layers: {} plan steps, {} SimGrid activities (best of {} runs each)\n", layers, steps,
               activities, repeat);
    fmt::print("parse (trace + plan): nlohmann v1 {:.3f} s (trace {:.3f} s, plan {:.3f} s), simdjson {:.3f} s -> "
               "{:.1f}x faster\n",
               baseline["parse_s"].get<double>(), baseline["parse_trace_s"].get<double>(),
               baseline["parse_plan_s"].get<double>(), parse_s, report["parse_speedup"].get<double>());
    for (const auto& [name, run, rate] : {std::tuple{"simgrid", &simgrid, simgrid_rate}, {"fast", &fast, fast_rate}})
      fmt::print("end to end, {:>7} engine: parse {:.3f} s (trace {:.3f} s, plan {:.3f} s) + simulate {:.3f} s + "
                 "write {:.3f} s = {:.3f} s -> {:.0f} activities/s, {:.0f} steps/s (simulated iteration {})\n",
                 name, (*run)["parse_s"].get<double>(), (*run)["parse_trace_s"].get<double>(),
                 (*run)["parse_plan_s"].get<double>(), (*run)["simulate_s"].get<double>(),
                 (*run)["write_s"].get<double>(), (*run)["total_s"].get<double>(), rate,
                 static_cast<double>(steps) / (*run)["total_s"].get<double>(),
                 units::format_duration((*run)["simulated_iteration_s"].get<double>()));
    fmt::print("raw SimGrid: {} activities in {:.3f} s -> {:.0f} activities/s\n", activities, raw_s, raw_rate);
    fmt::print("ratios: parse speed-up vs nlohmann {:.1f}x; end to end vs raw SimGrid activity rate: simgrid engine "
               "{:.2f}x, fast engine {:.2f}x\n",
               report["parse_speedup"].get<double>(), report["simgrid_vs_raw"].get<double>(),
               report["fast_vs_raw"].get<double>());
  } catch (const std::exception& error) {
    fmt::print(stderr, "memsim-bench: {}\n", error.what());
    return 2;
  }
  return 0;
}
