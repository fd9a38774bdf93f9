#include "memsim/sim/trace_analysis.hpp"

#include "memsim/sim/memory_cursor.hpp"

#include <type_traits>

namespace memsim {
namespace {

MemoryProfile profile_default_schedule(const TraceAnalysis& analysis)
{
  const Trace& trace = analysis.trace();
  MemoryCursor cursor(analysis.flat(), analysis.resident_tensors());
  MemoryProfile profile;
  profile.resident_bytes = cursor.start_bytes();
  profile.in_use_during.reserve(trace.ops.size());
  for (const Op& op : trace.ops) {
    profile.in_use_during.push_back(cursor.run(op.id));
    for (TensorId id : analysis.released_after(op.id))
      cursor.free(id);
  }
  profile.peak_bytes = cursor.peak();
  profile.peak_op = cursor.peak_op().value_or(0);
  return profile;
}

} // namespace

TraceAnalysis::TraceAnalysis(const Trace& trace) : flat_(trace), lifetimes_(default_lifetimes(trace))
{
  static_assert(std::is_same_v<OpId, TensorId>, "readers_ keeps op ids in a FlatLists of tensor ids");
  const std::size_t tensors = trace.tensors.size();
  std::vector<std::pair<std::size_t, OpId>> reads; // (tensor, op), each pair once; ops in id order
  std::vector<OpId> last_reader(tensors, -1);
  for (OpId op = 0; op < static_cast<OpId>(trace.ops.size()); ++op)
    for (TensorId id : flat_.inputs(op))
      if (OpId& last = last_reader[static_cast<std::size_t>(id)]; last != op) {
        last = op;
        reads.emplace_back(static_cast<std::size_t>(id), op);
      }
  readers_ = FlatLists(tensors, reads);
  std::vector<std::pair<std::size_t, TensorId>> releases; // (op, tensor)
  for (TensorId id = 0; id < static_cast<TensorId>(tensors); ++id) {
    if (preexisting(id))
      resident_tensors_.push_back(id);
    const TensorLifetime& life = lifetime(id);
    if (life.produced_by && life.released_after)
      releases.emplace_back(static_cast<std::size_t>(*life.released_after), id);
  }
  released_after_ = FlatLists(trace.ops.size(), releases);
  default_profile_ = profile_default_schedule(*this);
}

std::optional<OpId> TraceAnalysis::first_read(TensorId id) const
{
  const std::span<const OpId> readers = readers_[static_cast<std::size_t>(id)];
  if (readers.empty())
    return std::nullopt;
  return readers.front();
}

std::shared_ptr<const TraceAnalysis> analyze(const Trace& trace)
{
  return std::make_shared<const TraceAnalysis>(trace);
}

MemoryProfile default_memory_profile(const Trace& trace) { return TraceAnalysis(trace).default_profile(); }

} // namespace memsim
