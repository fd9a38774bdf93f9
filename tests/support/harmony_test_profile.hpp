#pragma once
// The 3-layer Harmony profile the estimator and search tests work out by hand.
#include "memsim/traces/layer_profile.hpp"

#include <array>
#include <cstdint>
#include <string>

namespace memsim::test {

// Layers 0, 1, 2 (2 = the loss), profiled at u = 1 only: forward 1, 2, 1 s; backward (recompute + backward) 3, 5,
// 2 s; peaks 10 (forward) and 20 (backward) bytes each; X = 1, 2, 1 bytes; W = 2, 1, 0 bytes; CPU update times
// `update_s`.
inline LayerProfile tiny_harmony_profile(const std::array<double, 3>& update_s)
{
  LayerProfile profile;
  profile.model = "tiny";
  profile.sampled_forward = {1};
  profile.sampled_backward = {1};
  const std::uint64_t weights[] = {2, 1, 0};
  for (std::size_t l = 0; l < 3; ++l)
    profile.layers.push_back({"layer" + std::to_string(l), weights[l], 0, 0, update_s[l], 0});
  ProfiledMicrobatch sample;
  sample.forward_time_s = {1, 2, 1};
  sample.backward_time_s = {3, 5, 2};
  sample.forward_peak_bytes = {10, 10, 10};
  sample.backward_peak_bytes = {20, 20, 20};
  sample.input_bytes = {1, 2, 1};
  profile.microbatches.emplace(1, sample);
  return profile;
}

} // namespace memsim::test
