// memsim-chain-bench: wall time of the chain DPs (rotor, offload-dp, pofo, autocapper, opportunist) on random
// heterogeneous chains of L layers with N memory levels (issue 4 asks for L = 50..1000 at N = 50). The chain is drawn
// from a fixed seed so runs are comparable; the memory is set between the chain's minimum and its keep-all need, where
// the DPs have the most to decide. Not a test: run it by hand; ctest only checks that a small run goes through.
#include "memsim/planners/chain.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <random>

namespace memsim::chain {
namespace {

Problem random_chain(int length, int levels, std::uint32_t seed)
{
  // Sizes in bytes first (a few layers much larger than the rest, as CNN stages), then discretized like the planners.
  std::mt19937 random(seed);
  std::uniform_real_distribution<double> output(1.0, 4.0), extra(0.0, 3.0), overhead(0.0, 1.0), time(0.5, 2.0);
  struct Bytes {
    double output, saved, forward_overhead, backward_overhead, forward_time, backward_time;
  };
  std::vector<Bytes> layers;
  double keep_all = 0, largest = 0, previous = 0;
  for (int l = 0; l < length; ++l) {
    Bytes b;
    b.output = output(random);
    b.saved = b.output + extra(random);
    b.forward_overhead = overhead(random);
    b.backward_overhead = overhead(random);
    b.forward_time = 1e-3 * time(random);
    b.backward_time = 2e-3 * time(random);
    keep_all += b.saved;
    largest = std::max(largest, 2 * previous + b.saved + b.output + b.backward_overhead);
    previous = b.output;
    layers.push_back(b);
  }
  // A third of the way from the largest layer to keeping everything: recomputation and offloading both matter.
  const double memory_bytes = largest + (keep_all - largest) / 3;
  const double unit = memory_bytes / levels;
  auto units = [&](double bytes) { return static_cast<int>(std::ceil(bytes / unit - 1e-9)); };
  Problem problem;
  problem.memory = levels;
  problem.unit_transfer_time = unit * 1e-3 / 2; // moving one average output takes about a forward
  for (const Bytes& b : layers)
    problem.stages.push_back(Stage{b.forward_time, b.backward_time, units(b.output),
                                   std::max(units(b.output), units(b.saved)), units(b.forward_overhead),
                                   units(b.backward_overhead)});
  return problem;
}

double seconds_of(const std::function<void()>& work)
{
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace
} // namespace memsim::chain

int main(int argc, char** argv)
{
  using namespace memsim::chain;
  CLI::App app("memsim-chain-bench: wall time of the chain DPs on random chains");
  std::vector<int> lengths{50, 100, 200, 500, 1000};
  int levels = 50;
  std::uint32_t seed = 1;
  app.add_option("--layers", lengths, "chain lengths L to time")->capture_default_str();
  app.add_option("--levels", levels, "memory levels N")->capture_default_str();
  app.add_option("--seed", seed, "random chain seed")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  fmt::print("{:>6} {:>4} {:>10} {:>10} {:>10} {:>10} {:>11} {:>12} {:>12}\n", "L", "N", "rotor_s", "pofo_s",
             "offload_s", "autocap_s", "opportun_s", "rotor_time", "pofo_time");
  for (int length : lengths) {
    const Problem problem = random_chain(length, levels, seed);
    double rotor_time = 0;
    BlockSchedule pofo, offload, capped, opportunist;
    std::unique_ptr<RotorTable> table;
    const double rotor_s = seconds_of([&] {
      table = std::make_unique<RotorTable>(problem);
      rotor_time = table->cost(1, length, levels);
    });
    // offload-dp, pofo and autocapper reuse rotor's table (pofo's Theorem 1 counts it); their own times exclude it.
    const double pofo_s = seconds_of([&] { pofo = solve_combined(problem, *table, {CombinedMode::full}); });
    const double offload_s =
        seconds_of([&] { offload = solve_combined(problem, *table, {CombinedMode::offload_only}); });
    const double capped_s =
        seconds_of([&] { capped = solve_combined(problem, *table, {CombinedMode::hidden_offloads}); });
    const double opportunist_s = seconds_of([&] { opportunist = solve_opportunist(problem, *table); });
    fmt::print("{:>6} {:>4} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>11.3f} {:>12.6f} {:>12.6f}\n", length, levels,
               rotor_s, pofo_s, offload_s, capped_s, opportunist_s, rotor_time, pofo.time);
  }
  return 0;
}
