#pragma once
// Importers: traces recorded by other tools, turned into memsim Traces (`memsim import FORMAT FILE -o OUT`).
// Each throws InputError with the file and the line (JSON lines) or JSON path of the first bad record.
#include "memsim/traces/trace.hpp"

#include <filesystem>
#include <optional>
#include <string>

namespace memsim {

// DTR prototype logs (uwsampl/dtr-prototype, simrd/logs.zip): JSON lines of CONSTANT / MEMORY / COPY / COPY_FROM /
// RELEASE / CALL / MUTATE / ALIAS / ANNOTATE. Accounting follows the DTR authors' simulator (simrd) with an
// unlimited budget and eager release: one memsim tensor per storage; a storage is released after the last CALL
// or MUTATE before the RELEASE that drops its last handle (`free_after`); storages still referenced at the end
// live to the last op; an in-place MUTATE yields a new storage of the same size and drops the old one, as simrd
// does; aliasing results (ALIAS >= 0) allocate nothing. CONSTANTs become resident weights. TIME is nanoseconds.
struct DtrImportStats {
  double total_compute_s = 0;       // sum of CALL and MUTATE TIMEs
  std::uint64_t constant_bytes = 0; // CONSTANT storages (resident)
  std::size_t calls = 0, mutates = 0, releases = 0, constants_after_first_call = 0;
};
Trace import_dtr_log(const std::filesystem::path& path, DtrImportStats* stats = nullptr);

// Checkmate training graphs (networkx node-link JSON): one op per node in topological order (cycles are refused),
// each producing one tensor of `cost_ram` bytes read by its successors; `backward` selects the phase;
// `cost_cpu` times `seconds_per_cost_unit` is the op time. The Moccasin random graphs (costs named by the graph's
// node_output_cost_tag / node_duration_tag, links as {"0": source, "1": target}) are read too.
Trace import_checkmate_graph(const std::filesystem::path& path, double seconds_per_cost_unit);

// PyTorch execution graph (ExecutionGraphObserver, schema 1.0.x): the top-level aten ops in node order, tensors by
// storage id (bytes from the largest view seen), phase from the autograd / optimizer ancestors. With `profile`
// (a Chrome/Kineto trace from torch.profiler of the same iteration), op times come from the GPU kernels launched
// by the op (joined by the record-function id and External id), else the op's CPU duration; without, times are 0.
Trace import_pytorch_execution_graph(const std::filesystem::path& path,
                                     const std::optional<std::filesystem::path>& profile);

} // namespace memsim
