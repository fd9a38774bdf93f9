#include "partitions.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>

namespace memsim::planning::mu_two {

std::vector<std::vector<int>> paper_partitions(int models)
{
  std::vector<std::vector<int>> result;
  for (int size = models / 2; size >= 1; --size) {
    const int count = models / size;
    const int rest = models - count * size;
    std::vector<int> sizes(static_cast<std::size_t>(count), size);
    if (rest > 0) {
      if ((count + 1) % 2 == 0 || rest == 1) {
        sizes.push_back(rest);
      } else {
        sizes.push_back((rest + 1) / 2);
        sizes.push_back(rest / 2);
      }
    }
    std::sort(sizes.begin(), sizes.end(), std::greater<>());
    if (std::find(result.begin(), result.end(), sizes) == result.end())
      result.push_back(std::move(sizes));
  }
  return result;
}

std::vector<std::vector<int>> all_partitions(int models)
{
  std::vector<std::vector<int>> result;
  std::vector<int> current;
  std::function<void(int, int)> extend = [&](int left, int largest) {
    if (left == 0) {
      if (current.size() >= 2)
        result.push_back(current);
      return;
    }
    for (int size = std::min(left, largest); size >= 1; --size) {
      current.push_back(size);
      extend(left - size, size);
      current.pop_back();
    }
  };
  extend(models, models);
  return result;
}

std::vector<std::vector<int>> candidate_partitions(int models, const std::string& rule, bool include_full_fusion)
{
  if (models < 1)
    throw InputError("models", "mu-two: models must be at least 1");
  std::vector<std::vector<int>> result;
  if (include_full_fusion || models == 1)
    result.push_back({models});
  std::vector<std::vector<int>> split;
  if (rule == "all")
    split = all_partitions(models);
  else if (rule == "finest") {
    if (models >= 2)
      split.push_back(std::vector<int>(static_cast<std::size_t>(models), 1));
  } else if (rule == "paper")
    split = paper_partitions(models);
  else if (rule != "none")
    throw InputError("partitions",
                     fmt::format("mu-two: unknown partition rule '{}' (paper, all, finest or none)", rule));
  result.insert(result.end(), split.begin(), split.end());
  return result;
}

std::string partition_text(const std::vector<int>& sizes) { return fmt::format("{}", fmt::join(sizes, "+")); }

} // namespace memsim::planning::mu_two
