#pragma once
// Per index (an op of a trace, a position of a sequence), a list of tensor ids, all in one flat array. Loops over
// mu-two's unrolled rings (10^5 ops of 312 bytes, their lists in separate blocks, rebuilt for every probed
// placement) spent most of their time in cache misses on a vector per index.
#include "memsim/traces/trace.hpp"

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace memsim {

class FlatLists {
public:
  FlatLists() = default;
  // `entries`: (index, tensor) pairs in any order, each index below `count`; every index's list comes out in
  // ascending tensor id.
  FlatLists(std::size_t count, const std::vector<std::pair<std::size_t, TensorId>>& entries);

  // Appends the next index's list, in the order given.
  void push_back(std::span<const TensorId> ids)
  {
    ids_.insert(ids_.end(), ids.begin(), ids.end());
    offsets_.push_back(ids_.size());
  }
  void reserve(std::size_t count) { offsets_.reserve(count + 1); }

  std::size_t size() const { return offsets_.size() - 1; }
  std::span<const TensorId> operator[](std::size_t index) const
  {
    return std::span<const TensorId>(ids_).subspan(offsets_[index], offsets_[index + 1] - offsets_[index]);
  }

private:
  std::vector<std::size_t> offsets_{0}; // index i's ids are ids_[offsets_[i], offsets_[i + 1])
  std::vector<TensorId> ids_;
};

} // namespace memsim
