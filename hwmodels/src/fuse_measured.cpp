// The measured fusion model: pick the recorded vmap-fused trace of k copies of a trace's model from a directory.
#include "memsim/common/error.hpp"
#include "memsim/hwmodels/fuse.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <regex>

namespace memsim {

namespace {

// "<stem>-b<batch>": the trace's name without a trailing "-k<n>", with "-b<batch>" appended when it lacks it.
std::string model_and_batch(const Trace& trace)
{
  static const std::regex fused_suffix("-k[0-9]+$");
  std::string base = std::regex_replace(trace.name, fused_suffix, "");
  const std::string batch = fmt::format("-b{}", trace.source.batch);
  if (base.size() < batch.size() || base.compare(base.size() - batch.size(), batch.size(), batch) != 0)
    base += batch;
  return base;
}

bool is_trace_file(const std::string& file_name)
{
  for (std::string_view suffix : {".trace.json", ".trace.json.gz"})
    if (file_name.size() > suffix.size() && file_name.ends_with(suffix))
      return true;
  return false;
}

} // namespace

Trace measured_fused_trace(const Trace& trace, int models, const std::filesystem::path& directory,
                           const std::string& source_name)
{
  if (trace.source.batch <= 0)
    throw InputError(source_name + ": at /source/batch",
                     "the trace does not say its batch size (source.batch), which picks the measured fused trace");
  if (directory.empty())
    throw InputError("--measured", "the measured fusion model needs a directory of recorded fused traces");
  if (!std::filesystem::is_directory(directory))
    throw InputError(directory.string(), "no such directory of recorded fused traces");
  const std::string base = model_and_batch(trace);
  const std::string prefix = fmt::format("{}-k{}-", base, models);
  const std::string wanted_name = fmt::format("{}-k{}", base, models);
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    const std::string file_name = entry.path().filename().string();
    if (entry.is_regular_file() && file_name.starts_with(prefix) && is_trace_file(file_name))
      files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end()); // deterministic choice and messages
  std::vector<std::pair<std::filesystem::path, Trace>> matches;
  for (const std::filesystem::path& file : files) {
    Trace recorded = load_trace(file);
    const bool named = recorded.name == wanted_name || (models == 1 && recorded.name == base);
    if (named && recorded.source.batch == trace.source.batch)
      matches.emplace_back(file, std::move(recorded));
  }
  if (matches.size() > 1) { // several tags: the one recorded on the trace's GPU
    const auto on_device = std::count_if(matches.begin(), matches.end(), [&](const auto& match) {
      return match.second.source.device == trace.source.device;
    });
    if (on_device == 1)
      std::erase_if(matches, [&](const auto& match) { return match.second.source.device != trace.source.device; });
  }
  std::vector<std::string> candidates;
  for (const std::filesystem::path& file : files)
    candidates.push_back(file.filename().string());
  if (matches.empty())
    throw InputError(directory.string(),
                     fmt::format("no recorded fused trace of {} models of '{}': looked for {}<tag>.trace.json[.gz] "
                                 "named '{}' with source.batch {}{}",
                                 models, trace.name, prefix, wanted_name, trace.source.batch,
                                 candidates.empty()
                                     ? std::string(" (no file has that prefix)")
                                     : fmt::format(" (files with that prefix: {})", fmt::join(candidates, ", "))));
  if (matches.size() > 1)
    throw InputError(directory.string(),
                     fmt::format("{} recorded fused traces of {} models of '{}' match and none is the only one "
                                 "recorded on '{}': {}",
                                 matches.size(), models, trace.name, trace.source.device, fmt::join(candidates, ", ")));
  Trace fused = std::move(matches.front().second);
  fused.name = fused_trace_name(trace.name, models);
  // Samples per iteration count every model; recordings made before the exporter wrote source.models lack it.
  fused.source.models = trace.source.models * models;
  return fused;
}

Trace fuse_models(const Trace& trace, int models, FusionModel model, const std::filesystem::path& measured,
                  const std::optional<Gpu>& recording_gpu, const std::string& source_name)
{
  if (models == 1)
    return trace; // under every model
  if (model == FusionModel::measured)
    return measured_fused_trace(trace, models, measured, source_name);
  return fuse_trace(trace, models, model, recording_gpu, source_name);
}

} // namespace memsim
