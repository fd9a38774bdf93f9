#include "memsim/sim/flat_lists.hpp"

#include <algorithm>

namespace memsim {

FlatLists::FlatLists(std::size_t count, const std::vector<std::pair<std::size_t, TensorId>>& entries)
    : offsets_(count + 1, 0), ids_(entries.size())
{
  for (const auto& entry : entries)
    ++offsets_[entry.first + 1];
  for (std::size_t i = 0; i < count; ++i)
    offsets_[i + 1] += offsets_[i];
  std::vector<std::size_t> next(offsets_.begin(), offsets_.end() - 1);
  for (const auto& [index, id] : entries)
    ids_[next[index]++] = id;
  for (std::size_t i = 0; i < count; ++i)
    if (offsets_[i + 1] - offsets_[i] > 1)
      std::sort(ids_.begin() + static_cast<std::ptrdiff_t>(offsets_[i]),
                ids_.begin() + static_cast<std::ptrdiff_t>(offsets_[i + 1]));
}

} // namespace memsim
