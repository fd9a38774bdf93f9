#pragma once
// The dimensions tsplit may split an op along and the tensor roles each implies (spec tsplit.md §2's roles table,
// §8.4's op types, §11-A14): which feature-map inputs are partitioned (freed part by part), the extent along the
// dimension, and the halo (spatial: a conv or pool over a band of rows also reads its neighbours' rows). An op is split
// along a dimension only if the op allows it (Op.split, else its type) and the planner's `dims` names it.
#include "memsim/traces/trace.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace memsim::tsplit {

// "batch,channel" -> the named dims in memsim's fixed order (batch, channel, spatial, sequence, heads); InputError on
// a name it does not know or an empty list.
std::vector<std::string> parse_dims(const std::string& list);

struct SplitAxis {
  std::string dim;
  std::int64_t extent = 0;                  // rows along the dim (the batch, or a shape's extent)
  std::vector<TensorId> partitioned_inputs; // feature-map inputs cut into parts; the others are read whole
  int halo = 0; // micro-op u also reads parts u-halo..u+halo of the partitioned inputs (spatial conv/pool: 1)
};

// The ways `op` may be split along `dims`; its feature-map outputs are partitioned in each.
std::vector<SplitAxis> split_axes(const Trace& trace, const Op& op, const std::vector<std::string>& dims,
                                  std::int64_t batch, bool splits_declared);

} // namespace memsim::tsplit
