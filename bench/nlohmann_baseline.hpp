#pragma once
// The parse baseline of memsim-bench: the v1 loader (commit 5d1fd6c, before simdjson) kept as it was --
// nlohmann::json parses the whole file into its DOM, json_io::Node walks it field by field. Only the bench uses
// it, to report how much faster load_trace/load_plan are.
#include "memsim/planners/plan.hpp"
#include "memsim/traces/trace.hpp"

#include <filesystem>

namespace memsim::bench {

Trace nlohmann_load_trace(const std::filesystem::path& path);
Plan nlohmann_load_plan(const std::filesystem::path& path);

} // namespace memsim::bench
