// Sweeps on a cluster: which cells a shard runs, the sweep.json that names a run's experiment and shard, and
// `memsim merge`, which joins the shards' folders into the output of an unsharded run.
#include "memsim/experiments/runner.hpp"

#include "memsim/experiments/processes.hpp"
#include "sweep_output.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/json_io.hpp"
#include "memsim/common/stable_hash.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <limits>

namespace memsim::experiments {
namespace {

constexpr const char* kManifestFormat = "memsim-sweep";

// A folder given to `memsim merge`, from its sweep.json; the plots and cells are read from the first one only
// (the others must have the same fingerprint).
struct ShardFolder {
  std::filesystem::path dir;
  std::string experiment;
  std::string fingerprint;
  Shard shard;
  std::vector<std::string> plots;
  std::vector<Cell> cells;
};

ShardFolder read_shard_folder(const std::filesystem::path& dir, bool with_cells)
{
  const std::filesystem::path file = dir / kManifestName;
  if (!std::filesystem::is_regular_file(file))
    throw InputError(dir.string(), fmt::format("not the output folder of a memsim run (no {}): run `memsim run EXP "
                                               "--shard I/N --out {}` first",
                                               kManifestName, dir.string()));
  const json_io::Json manifest = json_io::read_file(file);
  json_io::Node root(manifest, file.string());
  root.expect_format(kManifestFormat, 1);
  root.only_keys({"format", "version", "experiment", "fingerprint", "shard", "plots", "cells"});
  ShardFolder folder;
  folder.dir = dir;
  folder.experiment = root.at("experiment").as_string();
  folder.fingerprint = root.at("fingerprint").as_string();
  const json_io::Node shard = root.at("shard");
  shard.only_keys({"index", "count"});
  const std::uint64_t count = shard.at("count").as_uint();
  const std::uint64_t index = shard.at("index").as_uint();
  if (count == 0 || count > std::numeric_limits<unsigned>::max())
    shard.at("count").fail("must be between 1 and 2^32-1");
  if (index == 0 || index > count)
    shard.at("index").fail("must be between 1 and the count");
  folder.shard = Shard{static_cast<unsigned>(index), static_cast<unsigned>(count)};
  if (!with_cells)
    return folder;
  const json_io::Node plots = root.at("plots");
  for (std::size_t i = 0; i < plots.size(); ++i)
    folder.plots.push_back(plots.item(i).as_string());
  const json_io::Node cells = root.at("cells");
  for (std::size_t i = 0; i < cells.size(); ++i) {
    folder.cells.push_back(cell_from_json(cells.item(i).value(), file.string()));
    if (folder.cells.back().index != i)
      cells.item(i).at("index").fail(fmt::format("must be {} (cells are listed in order)", i));
  }
  return folder;
}

} // namespace

Shard parse_shard(const std::string& text)
{
  unsigned index = 0;
  unsigned count = 0;
  char slash = 0;
  char rest = 0;
  if (std::sscanf(text.c_str(), "%u%c%u%c", &index, &slash, &count, &rest) != 3 || slash != '/' ||
      text.find_first_not_of("0123456789/") != std::string::npos)
    throw InputError("--shard", fmt::format("'{}' is not I/N (for example 2/3: the second of three shards)", text));
  if (count == 0 || index == 0 || index > count)
    throw InputError("--shard", fmt::format("'{}': I must be between 1 and N, and N at least 1", text));
  return Shard{index, count};
}

json_io::Json sweep_manifest(const Experiment& experiment, const std::vector<Cell>& cells, Shard shard)
{
  std::string keys;
  json_io::Json cell_documents = json_io::Json::array();
  for (const Cell& cell : cells) {
    keys += cell_key(cell) + "\n";
    cell_documents.push_back(cell_to_json(cell));
  }
  std::string plots;
  for (const auto& plot : experiment.plots)
    plots += plot + ",";
  json_io::Json manifest;
  manifest["format"] = kManifestFormat;
  manifest["version"] = 1;
  manifest["experiment"] = experiment.name;
  manifest["fingerprint"] = stable_hash(experiment.name + "\n" + plots + "\n" + keys);
  manifest["shard"] = {{"index", shard.index}, {"count", shard.count}};
  manifest["plots"] = experiment.plots;
  manifest["cells"] = std::move(cell_documents);
  return manifest;
}

RunSummary merge_shards(const std::filesystem::path& out_dir, const std::vector<std::filesystem::path>& shard_dirs,
                        const RunOptions& options)
{
  const auto started = std::chrono::steady_clock::now();
  if (shard_dirs.empty())
    throw InputError("merge", "no shard folders given");
  std::vector<ShardFolder> folders;
  for (const auto& dir : shard_dirs) {
    ShardFolder folder = read_shard_folder(dir, folders.empty());
    const ShardFolder* first = folders.empty() ? nullptr : &folders.front();
    if (first != nullptr && folder.fingerprint != first->fingerprint)
      throw InputError((dir / kManifestName).string(),
                       fmt::format("a shard of experiment '{}' (fingerprint {}), not of experiment '{}' (fingerprint "
                                   "{}) like {}: only shards of the same experiment file can be merged",
                                   folder.experiment, folder.fingerprint, first->experiment, first->fingerprint,
                                   first->dir.string()));
    for (const auto& other : folders)
      if (other.shard.index == folder.shard.index && other.shard.count == folder.shard.count)
        throw InputError(dir.string(), fmt::format("shard {}/{} is given twice (also {})", folder.shard.index,
                                                   folder.shard.count, other.dir.string()));
    folders.push_back(std::move(folder));
  }
  const std::vector<Cell>& cells = folders.front().cells;
  const std::string& experiment_name = folders.front().experiment;

  // A cell's result comes from the folder of the shard that owns it, else from any folder that has it.
  std::vector<std::optional<CellResult>> results(cells.size());
  std::vector<std::string> missing;
  for (const Cell& cell : cells) {
    const std::string file = cell_key(cell) + ".json";
    std::vector<const ShardFolder*> order;
    for (const auto& folder : folders)
      if (folder.shard.owns(cell.index))
        order.insert(order.begin(), &folder);
      else
        order.push_back(&folder);
    for (const ShardFolder* folder : order) {
      results[cell.index] = read_cached(folder->dir / "cells" / file, cell);
      if (results[cell.index])
        break;
    }
    if (!results[cell.index]) {
      const unsigned count = folders.front().shard.count;
      const Shard owner{static_cast<unsigned>(cell.index % count) + 1, count};
      missing.push_back(fmt::format("cell {} ({}) of shard {}/{}", cell.index + 1, describe_cell(cell), owner.index,
                                    owner.count));
    }
  }
  if (!missing.empty()) {
    std::string list;
    for (std::size_t i = 0; i < missing.size() && i < 10; ++i)
      list += "\n  " + missing[i];
    if (missing.size() > 10)
      list += fmt::format("\n  ... and {} more", missing.size() - 10);
    throw InputError("merge", fmt::format("{} of {} cells of experiment '{}' have no result in the folders given:{}\n"
                                          "run (or rerun: it resumes) `memsim run EXP --shard I/N` for those shards "
                                          "and merge again",
                                          missing.size(), cells.size(), experiment_name, list));
  }
  create_output_folder(out_dir);
  std::filesystem::remove(out_dir / "results.csv");
  RunSummary summary;
  summary.cells = cells.size();
  summary.cached = cells.size();
  write_results(folders.front().plots, cells, results, out_dir, options, started, summary);
  return summary;
}

} // namespace memsim::experiments
