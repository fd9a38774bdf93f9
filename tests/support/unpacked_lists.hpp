#pragma once
// A FlatLists as a vector of vectors, for comparing with lists written out in a test.
#include "memsim/sim/flat_lists.hpp"

#include <vector>

namespace memsim::test {

inline std::vector<std::vector<TensorId>> unpacked(const FlatLists& lists)
{
  std::vector<std::vector<TensorId>> out;
  for (std::size_t i = 0; i < lists.size(); ++i)
    out.emplace_back(lists[i].begin(), lists[i].end());
  return out;
}

} // namespace memsim::test
