#pragma once
// What the dynamic-network generators share: their seeded draws, their parameter checks (errors located at the
// option) and the split of their batch-proportional ops.
#include "trace_builder.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <initializer_list>
#include <utility>

namespace memsim::dynamic {

// SplitMix64: fixed arithmetic, so a seed gives the same draws with every compiler and standard library (the
// distributions of <random> are implementation-defined).
class SeededDraws {
public:
  explicit SeededDraws(std::int64_t seed) : state_(static_cast<std::uint64_t>(seed)) {}
  std::uint64_t next()
  {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [low, high] (the modulo bias is below 2^-32 for the ranges used here).
  int between(int low, int high)
  {
    const auto span = static_cast<std::uint64_t>(high - low) + 1;
    return low + static_cast<int>(next() % span);
  }
  // Uniform in [0, 1) from the top 53 bits.
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
  std::uint64_t state_;
};

inline void check_at_least(std::int64_t value, std::int64_t minimum, const char* name)
{
  if (value < minimum)
    throw InputError(fmt::format("--{}", name), fmt::format("must be at least {}, found {}", minimum, value));
}

inline void check_positive(std::initializer_list<std::pair<int, const char*>> values)
{
  for (auto [value, name] : values)
    check_at_least(value, 1, name);
}

inline void check_range(int low, int high, const char* low_name, const char* high_name)
{
  if (low > high)
    throw InputError(fmt::format("--{}", high_name),
                     fmt::format("{} ({}) must not be below {} ({})", high_name, high, low_name, low));
}

inline const SplitDims kBatch{"batch"};

} // namespace memsim::dynamic
