// memsim-tsplit-bench: the tsplit planner (issue 10, items 1 and 4) on the shipped traces, the model presets and a
// generated trace of about 2,000 ops, at budgets from 0.3 to 1.0 of each keep-all peak, with and without split. Per
// plan: planning wall time, whether the engine (`--engine fast`, or `simgrid`: the reference, one forked child per
// plan) runs it within its budget, and the gap between the plan's estimate and the simulated iteration time. Prints
// the worst gap and the slowest plan at the end. Not a test: run it by hand
// (`build/release/bench/memsim-tsplit-bench`); ctest only checks that a small run goes through.
#include "simulate_in_child.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/hwmodels/roofline.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/generator_registry.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>

namespace memsim {
namespace {

struct Workload {
  std::string name;
  Trace trace;
};

Trace generate(const std::string& kind, const nlohmann::json& params, const Gpu& gpu)
{
  const GeneratorRegistry& registry = generator_registry();
  const GeneratorInfo& info = registry.get(kind);
  return info.make(registry.complete_params(info, params),
                   [&](const std::string& dtype) { return roofline_of(gpu, dtype).value_or(Roofline{}); });
}

int run(int argc, char** argv)
{
  CLI::App app{"tsplit planning time, feasibility and estimate gap"};
  std::string data = std::string(MEMSIM_SOURCE_DIR) + "/traces/data";
  std::string machine_name = "h100-80gb-pcie5";
  std::vector<double> fractions{0.3, 0.4, 0.5, 0.7, 1.0};
  bool quick = false;
  std::string engine = "fast";
  std::string dims = "batch";
  app.add_option("--data", data, "folder of shipped traces (empty: none)");
  app.add_option("--machine", machine_name, "machine preset or YAML file");
  app.add_option("--fractions", fractions, "budgets as fractions of each keep-all peak");
  app.add_flag("--quick", quick, "two small generated traces only (the ctest smoke run)");
  app.add_option("--engine", engine, "the engine the estimate is compared with: fast, or simgrid (a child per plan)")
      ->check(CLI::IsMember({"fast", "simgrid"}))
      ->capture_default_str();
  app.add_option("--dims", dims, "tsplit's dims parameter (e.g. spatial, batch,spatial)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const Machine machine =
      load_machine_or_preset(machine_name, std::filesystem::path(MEMSIM_SOURCE_DIR) / "configs" / "machines");
  const Gpu& gpu = machine.gpus.at(0);

  std::vector<Workload> workloads;
  if (quick) {
    workloads.push_back({"cnn-d8", generate("cnn", {{"depth", 8}, {"batch", 16}, {"image", 64}}, gpu)});
  } else {
    if (!data.empty()) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(data))
        if (entry.path().string().find(".trace.json") != std::string::npos)
          files.push_back(entry.path());
      std::sort(files.begin(), files.end());
      for (const auto& file : files)
        workloads.push_back({file.filename().string(), load_trace(file)});
    }
    for (const char* model : {"vgg16", "vgg19", "resnet50", "resnet101", "inception-v4", "transformer-iwslt"})
      workloads.push_back({fmt::format("preset {}", model), generate("preset", {{"model", model}}, gpu)});
    workloads.push_back({"cnn residual depth 180",
                         generate("cnn", {{"depth", 180}, {"residual", true}, {"batch", 32}}, gpu)});
  }

  double worst_gap = 0;
  std::string worst_gap_at;
  double slowest = 0;
  std::string slowest_at;
  int planned = 0, infeasible_plans = 0, over_budget = 0;
  fmt::print("{:<36} {:>5} {:>5} {:<12} {:>9} {:>10} {:>10} {:>7} {}\n", "workload", "ops", "frac", "variant", "plan_s",
             "estimate_s", "sim_s", "gap_%", "outcome");
  for (const Workload& w : workloads) {
    const std::uint64_t peak = default_memory_profile(w.trace).peak_bytes;
    for (double fraction : fractions) {
      const auto budget = static_cast<std::uint64_t>(fraction * static_cast<double>(peak));
      if (budget > gpu.memory)
        continue;
      for (bool split : {true, false}) {
        PlanRequest request;
        request.budget_bytes = budget;
        request.params = {{"split", split}, {"dims", dims}};
        const std::string variant = split ? "tsplit" : "w/o split";
        const auto start = std::chrono::steady_clock::now();
        Plan plan;
        std::string outcome;
        try {
          plan = make_plan("tsplit", w.trace, machine, request);
        } catch (const Infeasible& e) {
          outcome = "infeasible";
        }
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const std::string where = fmt::format("{} at {} ({})", w.name, fraction, variant);
        if (seconds > slowest) {
          slowest = seconds;
          slowest_at = where;
        }
        if (!outcome.empty()) {
          fmt::print("{:<36} {:>5} {:>5.2f} {:<12} {:>9.3f} {:>10} {:>10} {:>7} {}\n", w.name, w.trace.ops.size(),
                     fraction, variant, seconds, "-", "-", "-", outcome);
          continue;
        }
        ++planned;
        SimOptions options;
        options.engine = *engine_kind_from_string(engine);
        options.record_timeline = false;
        const RunResult run = options.engine == EngineKind::fast
                                  ? simulate(w.trace, machine, plan, options)
                                  : test::simulate_in_child(w.trace, machine, plan, options);
        const double estimate = plan.estimate.iteration_time_s.value_or(0);
        const double simulated = run.metrics.iteration_time_s;
        double gap = 0;
        if (!run.metrics.feasible) {
          ++infeasible_plans;
          outcome = "SIMULATION FAILED: " + run.error->message;
        } else if (run.metrics.peak_device_bytes > budget) {
          ++over_budget;
          outcome = "OVER BUDGET";
        } else {
          gap = std::abs(estimate - simulated) / simulated * 100;
          outcome = fmt::format("ok, {} splits", std::count_if(plan.steps.begin(), plan.steps.end(), [](const Step& s) {
                                  return s.kind == StepKind::split;
                                }));
          if (gap > worst_gap) {
            worst_gap = gap;
            worst_gap_at = where;
          }
        }
        fmt::print("{:<36} {:>5} {:>5.2f} {:<12} {:>9.3f} {:>10.4f} {:>10.4f} {:>7.3f} {}\n", w.name,
                   w.trace.ops.size(), fraction, variant, seconds, estimate, simulated, gap, outcome);
      }
    }
  }
  fmt::print("{} plans; {} failed in simulation, {} over budget\n", planned, infeasible_plans, over_budget);
  fmt::print("worst estimate gap {:.4f} % ({})\n", worst_gap, worst_gap_at);
  fmt::print("slowest plan {:.3f} s ({})\n", slowest, slowest_at);
  return infeasible_plans + over_budget == 0 ? 0 : 1;
}

} // namespace
} // namespace memsim

int main(int argc, char** argv) { return memsim::run(argc, argv); }
