#pragma once
// What `memsim run` and `memsim merge` share: reading a cached cell result, writing results.csv, the table and the
// plots, and the sweep.json that names a run's experiment and shard.
#include "memsim/experiments/runner.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace memsim::experiments {

inline constexpr const char* kManifestName = "sweep.json";

// The result cached in `file`, when it was computed for exactly this cell (same key) and reads back whole.
std::optional<CellResult> read_cached(const std::filesystem::path& file, const Cell& cell);

// OUT/results.csv, the table (to options.table_output) and the plots, from a result for every cell: the same bytes
// whether the cells ran here or on the shards of a cluster.
void write_results(const std::vector<std::string>& plots, const std::vector<Cell>& cells,
                   const std::vector<std::optional<CellResult>>& results, const std::filesystem::path& out_dir,
                   const RunOptions& options, std::chrono::steady_clock::time_point started, RunSummary& summary);

// sweep.json: the experiment's name, a fingerprint of its plots and every cell's key in order, the shard, and every
// cell, so that `memsim merge` needs nothing but the folders.
nlohmann::json sweep_manifest(const Experiment& experiment, const std::vector<Cell>& cells, Shard shard);

} // namespace memsim::experiments
