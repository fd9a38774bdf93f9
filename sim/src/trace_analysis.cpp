#include "memsim/sim/trace_analysis.hpp"

#include "memsim/sim/memory_cursor.hpp"

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

TraceAnalysis::TraceAnalysis(const Trace& trace)
    : flat_(trace), lifetimes_(default_lifetimes(trace)), readers_(trace.tensors.size()),
      released_after_(trace.ops.size())
{
  for (const Op& op : trace.ops)
    for (TensorId id : op.inputs) {
      auto& readers = readers_[static_cast<std::size_t>(id)];
      if (readers.empty() || readers.back() != op.id)
        readers.push_back(op.id);
    }
  for (const Tensor& tensor : trace.tensors) {
    if (preexisting(tensor.id))
      resident_tensors_.push_back(tensor.id);
    const TensorLifetime& life = lifetime(tensor.id);
    if (life.produced_by && life.released_after)
      released_after_[static_cast<std::size_t>(*life.released_after)].push_back(tensor.id);
  }
  default_profile_ = profile_default_schedule(*this);
}

std::optional<OpId> TraceAnalysis::first_read(TensorId id) const
{
  const auto& readers = readers_[static_cast<std::size_t>(id)];
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
