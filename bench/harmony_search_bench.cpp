// memsim-harmony-search-bench: Harmony's configuration search (`memsim harmony search`, issue 12 item 5) timed on the
// authors' committed GTX 1080 Ti profiles converted to JSON, at Table 1's settings (Harmony PP, N = 4, D = 64, the
// paper scripts' packing flags), next to the authors' Python search times. The profiles are not shipped: pass their
// folder with --profiles or MEMSIM_HARMONY_PROFILES; without them the bench says so and exits 0. Not a test: run it
// by hand (`build/release/bench/memsim-harmony-search-bench --profiles DIR`); ctest only checks the skip path.
#include "memsim/planners/harmony/search.hpp"
#include "memsim/traces/layer_profile.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace memsim {
namespace {

// One row of Table 1 with the authors' Python search times for it.
struct Row {
  const char* model;
  double memory_cap;     // bytes, as the Table-1 script passes it
  const char* expected;  // Table 1's U_F/|P_F|/U_B/|P_B|
  double paper_python_s; // Table 1, the authors' server
  double rerun_python_s; // spec §1.5: the authors' scheduler rerun on a 2-core machine, Python 3.11
};

constexpr double kGiB10 = 10.0 * 1024 * 1024 * 1024;
constexpr Row kRows[] = {
    {"bert_96", 9e9, "16/24/16/25", 1.4, 2.1},
    {"gpt2_xl", 9e9, "4/10/4/17", 0.7, 0.95},
    {"vgg416", kGiB10, "8/15/8/16", 17.7, 33.1},
};
constexpr int kGpus = 4;
constexpr int kMinibatch = 64;

double median(std::vector<double> values)
{
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

int run(int argc, char** argv)
{
  CLI::App app{"Harmony configuration search time on the authors' profiles (Table 1 settings)"};
  std::string profiles;
  if (const char* env = std::getenv("MEMSIM_HARMONY_PROFILES"))
    profiles = env;
  int repeats = 5;
  app.add_option("--profiles", profiles, "folder of converted harmony profiles (bert_96.json, gpt2_xl.json, ...)");
  app.add_option("--repeats", repeats, "timed searches per model (the median is reported)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (profiles.empty() || !std::filesystem::is_directory(profiles)) {
    fmt::print("skipped: no profile folder (pass --profiles DIR or set MEMSIM_HARMONY_PROFILES; the converted "
               "profiles are in ../shared/data/harmony-profiles)\n");
    return 0;
  }

  fmt::print("Harmony PP, N={}, D={}, packing fwd balanced_time+reuse, bwd balanced_time, Top-1; {} runs each\n", kGpus,
             kMinibatch, repeats);
  fmt::print("ratios: the authors' Python search time (Table 1 / spec's 2-core rerun) over memsim's median CPU time\n");
  fmt::print("{:<8} {:<12} {:<12} {:>10} {:>6} {:>10} {:>10} {:>10} {:>9} {:>9} {:>8} {:>8}\n", "model", "found",
             "table1", "estimate_s", "cands", "median_s", "min_s", "cpu_s", "py_paper", "py_rerun", "x_paper",
             "x_rerun");
  for (const Row& row : kRows) {
    const std::filesystem::path file = std::filesystem::path(profiles) / (std::string(row.model) + ".json");
    if (!std::filesystem::exists(file)) {
      fmt::print("{:<8} skipped: {} is missing\n", row.model, file.string());
      continue;
    }
    const LayerProfile profile = load_layer_profile(file);
    harmony::SearchSettings settings;
    settings.memory_cap = row.memory_cap;
    std::vector<double> seconds;
    std::vector<double> cpu_seconds; // process CPU time: what a loaded shared machine distorts least
    std::optional<harmony::SearchResult> result;
    for (int i = 0; i < repeats; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const std::clock_t cpu_start = std::clock();
      result = harmony::search(profile, kGpus, kMinibatch, harmony::Mode::pp, settings);
      cpu_seconds.push_back(static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC);
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    if (!result) {
      fmt::print("{:<8} no configuration fits\n", row.model);
      continue;
    }
    const harmony::Configuration& best = result->best;
    const std::string found = fmt::format("{}/{}/{}/{}", best.u_forward, best.packs_forward.size(), best.u_backward,
                                          best.packs_backward.size());
    const double cpu = median(cpu_seconds);
    // Where the time goes: one estimate of the winning configuration, times the candidates, is roughly the share of
    // the estimator (the rest is packing and task-graph composition).
    std::vector<double> estimate_seconds;
    for (int i = 0; i < repeats; ++i) {
      const auto start = std::chrono::steady_clock::now();
      (void)harmony::estimate(profile, kGpus, kMinibatch, harmony::Mode::pp, result->best, settings.estimator);
      estimate_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    const double one_estimate = median(estimate_seconds);
    fmt::print(
        "{:<8} {:<12} {:<12} {:>10.3f} {:>6} {:>10.4f} {:>10.4f} {:>10.4f} {:>9.2f} {:>9.2f} {:>7.0f}x {:>7.0f}x\n",
        row.model, found, row.expected, result->estimate.iteration_s, result->candidates, median(seconds),
        *std::min_element(seconds.begin(), seconds.end()), cpu, row.paper_python_s, row.rerun_python_s,
        row.paper_python_s / cpu, row.rerun_python_s / cpu);
    fmt::print("{:<8} one estimate of the best {:.2f} ms; x {} candidates = {:.0f}% of the median search\n", "",
               one_estimate * 1e3, result->candidates, 100 * one_estimate * result->candidates / median(seconds));
  }
  return 0;
}

} // namespace
} // namespace memsim

int main(int argc, char** argv) { return memsim::run(argc, argv); }
