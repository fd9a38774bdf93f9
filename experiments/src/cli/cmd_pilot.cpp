// memsim pilot train | eval: DyNN-Offload's pilot (pilot/): train it on the iterations of dynamic traces (labels:
// the partition DP's blocks at a budget), evaluate a saved model on a trace (exact-match accuracy, mispredicted
// iterations, parameters, measured inference time per prediction).
#include "commands.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"
#include "memsim/hwmodels/roofline.hpp"
#include "memsim/pilot/pilot.hpp"
#include "memsim/traces/generator_registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>

namespace memsim::cli {
namespace {

struct WorkloadOptions {
  std::string workload;                // a generator name
  std::vector<std::string> gen_params; // its parameters, k=v
  std::vector<std::string> traces;
  std::string machine;
  std::size_t gpu = 0;
  std::string budget;
  std::string type; // empty in eval: the model's
};

struct TrainOptions : WorkloadOptions {
  pilot::PilotConfig config;
  std::size_t max_blocks = 32;
  std::size_t static_rows = 16;
  double held_out = 0.25;
  std::string out;
};

struct EvalOptions : WorkloadOptions {
  std::string model;
  double dims_tolerance = 0.05;
};

std::uint64_t budget_bytes(const std::string& text)
{
  try {
    return units::parse_bytes(text);
  } catch (const std::invalid_argument& error) {
    throw InputError("--budget", error.what());
  }
}

dynn::NetworkType network_type(const std::string& text)
{
  const std::optional<dynn::NetworkType> type = dynn::network_type_from_string(text);
  if (!type)
    throw InputError("--type", fmt::format("expected cnn, lstm or transformer, found '{}'", text));
  return *type;
}

Machine load_machine(const WorkloadOptions& options)
{
  Machine machine = load_machine_or_preset(options.machine, default_presets_dir());
  if (options.gpu >= machine.gpus.size())
    throw InputError("--gpu", fmt::format("machine '{}' has {} GPU(s)", machine.name, machine.gpus.size()));
  return machine;
}

// The traces of a workload: the generated one (--workload) or the files (--trace), in order.
std::vector<Trace> workload_traces(const WorkloadOptions& options, const Machine& machine)
{
  if (options.workload.empty() == options.traces.empty())
    throw InputError("--workload", "give either --workload GEN or --trace FILE (one or more)");
  std::vector<Trace> traces;
  for (const std::string& path : options.traces)
    traces.push_back(load_trace(path));
  if (!options.workload.empty()) {
    const GeneratorRegistry& registry = generator_registry();
    const GeneratorInfo* info = registry.find(options.workload);
    if (info == nullptr)
      throw InputError("--workload",
                       fmt::format("unknown generator '{}' (valid: {})", options.workload, registry.names()));
    const ParamValues values = registry.complete_params(
        *info, parse_param_assignments("generator", info->name, info->params, options.gen_params, "--gen-param"));
    const Gpu& gpu = machine.gpus[options.gpu];
    traces.push_back(info->make(values, [&](const std::string& dtype) {
      const std::optional<Roofline> roofline = roofline_of(gpu, dtype);
      if (!roofline)
        throw InputError("--gen-param", fmt::format("GPU '{}' has no peak_flops for {}", gpu.name, dtype));
      return *roofline;
    }));
  }
  return traces;
}

std::vector<dynn::PilotSample> workload_samples(const std::vector<Trace>& traces, const Machine& machine,
                                                std::uint64_t budget, dynn::NetworkType type,
                                                const dynn::PilotShape& shape)
{
  std::vector<dynn::PilotSample> samples;
  for (const Trace& trace : traces) {
    std::vector<dynn::PilotSample> more = dynn::pilot_samples(trace, machine, budget / 2, type, shape);
    samples.insert(samples.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  return samples;
}

// Wall time of one prediction, averaged over every sample (at least 1000 predictions); never enters a simulation.
double seconds_per_prediction(const pilot::PilotModel& model, const std::vector<dynn::PilotSample>& samples)
{
  if (samples.empty())
    return 0;
  std::size_t predictions = 0;
  const auto start = std::chrono::steady_clock::now();
  while (predictions < 1000)
    for (const dynn::PilotSample& sample : samples) {
      (void)model.predict(sample.input, sample.type);
      ++predictions;
    }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
         static_cast<double>(predictions);
}

void print_evaluation(const std::string& what, const pilot::PilotEvaluation& evaluation)
{
  std::string iterations;
  constexpr std::size_t kListed = 20; // the first mispredicted iterations, then a count
  for (std::size_t i = 0; i < std::min(kListed, evaluation.mispredicted.size()); ++i)
    iterations += fmt::format("{}{}", i == 0 ? "" : " ", evaluation.mispredicted[i]);
  if (evaluation.mispredicted.size() > kListed)
    iterations += fmt::format(" ... ({} more)", evaluation.mispredicted.size() - kListed);
  fmt::print("{}: {} samples, accuracy {:.4f} ({} exact), {} mispredicted ({} unresolvable), {} label vectors "
             "match{}\n",
             what, evaluation.samples, evaluation.accuracy(), evaluation.exact, evaluation.mispredicted.size(),
             evaluation.unresolvable, evaluation.vector_match,
             iterations.empty() ? "" : fmt::format("; mispredicted iterations: {}", iterations));
}

void print_cost(const pilot::PilotModel& model, const std::vector<dynn::PilotSample>& samples)
{
  fmt::print("parameters: {} per network ({} bytes as float32), {} in all; inference {:.2f} us per prediction "
             "(measured, one thread)\n",
             model.parameters_per_network(), 4 * model.parameters_per_network(), model.parameters(),
             1e6 * seconds_per_prediction(model, samples));
}

void add_workload_options(CLI::App* command, WorkloadOptions& options, bool required)
{
  command->add_option("--workload", options.workload, "dynamic generator whose trace gives the samples");
  command->add_option("--gen-param", options.gen_params, "generator parameter NAME=VALUE (repeatable)");
  command->add_option("--trace", options.traces, "trace file whose iterations are the samples (repeatable)");
  auto* machine = command->add_option("--machine", options.machine, "machine preset or YAML file");
  command->add_option("--gpu", options.gpu, "GPU of the machine (roofline, cost model)")->default_val(0);
  auto* budget = command->add_option("--budget", options.budget, "device memory budget (two buffers of half)");
  auto* type = command->add_option("--type", options.type, "network type: cnn, lstm or transformer");
  if (required) {
    type->default_val("lstm");
    machine->required();
    budget->required();
  }
}

void run_train(const TrainOptions& options)
{
  const Machine machine = load_machine(options);
  const std::uint64_t budget = budget_bytes(options.budget);
  if (!(options.held_out >= 0 && options.held_out < 1))
    throw InputError("--held-out", fmt::format("must be in [0, 1), found {}", options.held_out));
  const dynn::NetworkType type = network_type(options.type);
  const dynn::PilotShape shape{options.max_blocks, options.static_rows};
  std::vector<dynn::PilotSample> samples =
      workload_samples(workload_traces(options, machine), machine, budget, type, shape);
  // The last held-out share of the iterations is never trained on.
  const auto held_count = static_cast<std::size_t>(options.held_out * static_cast<double>(samples.size()));
  std::vector<dynn::PilotSample> held(std::make_move_iterator(samples.end() - static_cast<std::ptrdiff_t>(held_count)),
                                      std::make_move_iterator(samples.end()));
  samples.resize(samples.size() - held_count);
  if (samples.empty())
    throw InputError("--held-out", "no training samples left");
  pilot::PilotModel model(shape, options.config);
  const pilot::TrainingReport report = model.train(samples);
  fmt::print("trained on {} iterations, {} epochs, final loss {:.6g}\n", samples.size(), report.epochs,
             report.final_loss);
  print_evaluation("training", pilot::evaluate(model, samples));
  if (!held.empty())
    print_evaluation("held-out", pilot::evaluate(model, held));
  print_cost(model, held.empty() ? samples : held);
  nlohmann::json provenance{{"machine", options.machine},       {"gpu", options.gpu},
                            {"budget_bytes", budget},           {"type", options.type},
                            {"traces", options.traces},         {"workload", options.workload},
                            {"gen_params", options.gen_params}, {"training_samples", samples.size()},
                            {"held_out_samples", held.size()}};
  pilot::save_pilot(model, provenance, options.out);
  fmt::print("wrote {}\n", options.out);
}

void run_eval(EvalOptions options)
{
  const pilot::LoadedPilot loaded = pilot::load_pilot(options.model);
  // Machine, budget and type default to what the model was trained at.
  if (options.machine.empty())
    options.machine = loaded.provenance.value("machine", "");
  if (options.budget.empty() && loaded.provenance.contains("budget_bytes"))
    options.budget = std::to_string(loaded.provenance.at("budget_bytes").get<std::uint64_t>());
  if (options.machine.empty() || options.budget.empty())
    throw InputError("--machine", "the model records no machine or budget: give --machine and --budget");
  if (options.type.empty())
    options.type = loaded.provenance.value("type", "lstm");
  const Machine machine = load_machine(options);
  const std::vector<dynn::PilotSample> samples =
      workload_samples(workload_traces(options, machine), machine, budget_bytes(options.budget),
                       network_type(options.type), loaded.model.shape());
  print_evaluation(options.model, pilot::evaluate(loaded.model, samples, options.dims_tolerance));
  print_cost(loaded.model, samples);
}

} // namespace

void add_pilot_command(CLI::App& app, Context&)
{
  CLI::App* pilot = app.add_subcommand("pilot", "DyNN-Offload's pilot: train it, evaluate it (libtorch)");
  pilot->require_subcommand(1);

  auto train_options = std::make_shared<TrainOptions>();
  CLI::App* train =
      pilot->add_subcommand("train",
                            "Train the pilot on the iterations of dynamic traces; the last --held-out share is tested");
  add_workload_options(train, *train_options, true);
  train->add_option("--hidden", train_options->config.hidden, "neurons per hidden layer")->default_val(64);
  train->add_option("--epochs", train_options->config.epochs, "passes over the samples")->default_val(1500);
  train->add_option("--batch", train_options->config.batch, "mini-batch size")->default_val(16);
  train->add_option("--lr", train_options->config.learning_rate, "Adam's learning rate")->default_val(3e-3);
  train->add_option("--seed", train_options->config.seed, "seed of the initial weights and shuffles")->default_val(1);
  train->add_option("--max-blocks", train_options->max_blocks, "label slots (K_max)")->default_val(32);
  train->add_option("--static-rows", train_options->static_rows, "rows of the static architecture (R_max)")
      ->default_val(16);
  train->add_option("--held-out", train_options->held_out, "share of the last iterations not trained on")
      ->default_val(0.25);
  train->add_option("-o,--out", train_options->out, "model file to write (memsim-pilot JSON)")->required();
  train->callback([train_options] { run_train(*train_options); });

  auto eval_options = std::make_shared<EvalOptions>();
  CLI::App* eval = pilot->add_subcommand("eval", "Evaluate a trained pilot on the iterations of dynamic traces");
  add_workload_options(eval, *eval_options, false);
  eval->add_option("--model", eval_options->model, "model file (memsim pilot train -o)")->required();
  eval->add_option("--dims-tolerance", eval_options->dims_tolerance,
                   "relative tolerance of the dimension sums in the label-vector match")
      ->default_val(0.05);
  eval->callback([eval_options] { run_eval(*eval_options); });
}

} // namespace memsim::cli
