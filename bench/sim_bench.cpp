// memsim-bench: simulator throughput on a generated chain with an offload and a prefetch per layer.
//
//   end to end   parse the trace and plan files + simulate: plan steps per second
//   raw SimGrid  the same number of activities issued by three bare stream actors (exec, send, send) with no
//                memsim logic: the ceiling the simulator's own bookkeeping is measured against
//
// Each measurement runs in its own child process (one SimGrid engine per process) and reports wall time.
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
    trace.tensors.push_back(Tensor{static_cast<TensorId>(trace.tensors.size()), std::move(name), bytes, kind, {}});
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
    op(fmt::format("f{}", l), Phase::forward, l, {activations[static_cast<std::size_t>(l - 1)], w},
       activations.back(), kForwardSeconds);
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
  std::vector<StepId> forward(static_cast<std::size_t>(layers + 1), -1), freed(static_cast<std::size_t>(layers + 1), -1);
  std::vector<StepId> offload(static_cast<std::size_t>(layers + 1), -1);
  for (int l = 1; l <= layers; ++l) {
    forward[static_cast<std::size_t>(l)] = build.compute(l - 1);
    if (l >= 2 && l - 1 < layers) // a(l-1) was read by f(l): its device copy can go
      freed[static_cast<std::size_t>(l - 1)] =
          build.free(activation(l - 1), {offload[static_cast<std::size_t>(l - 1)], forward[static_cast<std::size_t>(l)]}, "d2h");
    if (l < layers)
      offload[static_cast<std::size_t>(l)] = build.offload(activation(l), {forward[static_cast<std::size_t>(l)]});
  }
  StepId previous = build.compute(loss);
  build.free(activation(layers));
  std::vector<StepId> prefetched(static_cast<std::size_t>(layers + 1), -1);
  auto prefetch = [&](int l, StepId after) {
    if (l >= 1 && l < layers)
      prefetched[static_cast<std::size_t>(l)] = build.prefetch(activation(l), {freed[static_cast<std::size_t>(l)], after});
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

} // namespace
} // namespace memsim

int main(int argc, char** argv)
{
  using namespace memsim;
  CLI::App app("memsim-bench: simulated plan steps per second on a generated chain with an offload and a prefetch "
               "per layer (end to end: parse + simulate), and the raw SimGrid activity rate");
  int layers = 15000;
  std::string work_dir = std::filesystem::temp_directory_path() / "memsim-bench";
  bool json = false;
  app.add_option("--layers", layers, "chain layers (about 7 plan steps each)")->check(CLI::Range(2, 10000000));
  app.add_option("--work-dir", work_dir, "where the generated trace and plan are written");
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);

  try {
    std::filesystem::create_directories(work_dir);
    const Trace trace = chain_trace(layers);
    const Plan plan = chain_plan(trace, layers);
    const auto trace_file = std::filesystem::path(work_dir) / "chain.trace.json";
    const auto plan_file = std::filesystem::path(work_dir) / "chain.plan.json";
    save_trace(trace, trace_file);
    save_plan(plan, plan_file);
    const Machine machine = bench_machine();

    const nlohmann::json end_to_end = nlohmann::json::parse(in_child([&] {
      const auto start = std::chrono::steady_clock::now();
      const Trace loaded = load_trace(trace_file);
      const double parse_trace_s = seconds_since(start);
      const auto plan_start = std::chrono::steady_clock::now();
      const Plan loaded_plan = load_plan(plan_file);
      const double parse_plan_s = seconds_since(plan_start);
      const double parse_s = seconds_since(start);
      const auto simulate_start = std::chrono::steady_clock::now();
      const RunResult result = simulate(loaded, machine, loaded_plan, SimOptions{false});
      const double simulate_s = seconds_since(simulate_start);
      return nlohmann::json{{"parse_s", parse_s},
                            {"parse_trace_s", parse_trace_s},
                            {"parse_plan_s", parse_plan_s},
                            {"simulate_s", simulate_s},
                            {"feasible", result.metrics.feasible},
                            {"steps_executed", result.metrics.steps_executed},
                            {"simulated_iteration_s", result.metrics.iteration_time_s},
                            {"error", result.error ? result.error->message : ""}}
          .dump();
    }));
    const std::size_t steps = plan.steps.size();
    // The simulator issues one SimGrid activity per compute/offload/prefetch step; frees are bookkeeping only.
    std::size_t activities = 0;
    for (const Step& step : plan.steps)
      activities += step.kind != StepKind::free;
    const double raw_s = std::stod(in_child([&] { return fmt::format("{:.9f}", raw_simgrid_seconds(activities)); }));

    const double total_s = end_to_end["parse_s"].get<double>() + end_to_end["simulate_s"].get<double>();
    nlohmann::json report = {{"layers", layers},
                             {"plan_steps", steps},
                             {"simgrid_activities", activities},
                             {"end_to_end", end_to_end},
                             {"steps_per_s", static_cast<double>(steps) / total_s},
                             {"raw_simgrid_s", raw_s},
                             {"raw_simgrid_activities_per_s", static_cast<double>(activities) / raw_s}};
    if (!end_to_end["feasible"].get<bool>() || end_to_end["steps_executed"].get<std::size_t>() != steps) {
      fmt::print(stderr, "memsim-bench: the benchmark plan did not run through: {}\n", end_to_end.dump());
      return 1;
    }
    if (json) {
      fmt::print("{}\n", report.dump());
    } else {
      fmt::print("chain of {} layers: {} plan steps, {} SimGrid activities\n", layers, steps, activities);
      fmt::print("end to end: parse {:.3f} s (trace {:.3f} s, plan {:.3f} s) + simulate {:.3f} s = {:.3f} s -> {:.0f} "
                 "steps/s (simulated iteration {})\n",
                 end_to_end["parse_s"].get<double>(), end_to_end["parse_trace_s"].get<double>(),
                 end_to_end["parse_plan_s"].get<double>(), end_to_end["simulate_s"].get<double>(), total_s,
                 report["steps_per_s"].get<double>(),
                 units::format_duration(end_to_end["simulated_iteration_s"].get<double>()));
      fmt::print("raw SimGrid: {} activities in {:.3f} s -> {:.0f} activities/s\n", activities, raw_s,
                 report["raw_simgrid_activities_per_s"].get<double>());
    }
  } catch (const std::exception& error) {
    fmt::print(stderr, "memsim-bench: {}\n", error.what());
    return 2;
  }
  return 0;
}
