#pragma once
// Per-layer profiles, the workload of Harmony-style planners: for each layer of a sequential chain and each sampled
// microbatch size u, the forward and backward (recompute + backward) times, their peak memory and the bytes X(u,l)
// entering the layer; per layer the weight, buffer and optimizer-state bytes and the CPU optimizer-step time.
// It is not a memsim Trace (no ops or tensor lifetimes, and values at several batch sizes), so it has its own file
// format, "memsim-layer-profile" (traces/src/LAYER_PROFILE.md).
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace memsim {

enum class LayerPass { forward, backward };

struct ProfiledLayer {
  std::string name;
  std::uint64_t weight_bytes = 0;
  std::uint64_t buffer_bytes = 0;
  std::uint64_t optimizer_state_bytes = 0;
  double cpu_update_s = 0;                  // optimizer step of this layer on the host
  std::uint64_t input_bytes_per_sample = 0; // X(u,l) at an unsampled u is u times this
};

// The profile at one sampled microbatch size. Backward vectors are empty when u was sampled for forward only.
struct ProfiledMicrobatch {
  std::vector<double> forward_time_s;
  std::vector<double> backward_time_s; // forward with autograd (the recompute) plus backward
  std::vector<std::int64_t> forward_peak_bytes;
  std::vector<std::int64_t> backward_peak_bytes;
  std::vector<std::uint64_t> input_bytes; // X(u,l)
};

struct LayerProfile {
  std::string model;
  std::string source; // provenance, one line
  std::vector<ProfiledLayer> layers;
  std::vector<int> sampled_forward;               // ascending
  std::vector<int> sampled_backward;              // ascending, a subset of sampled_forward
  std::map<int, ProfiledMicrobatch> microbatches; // one per u in sampled_forward

  std::size_t num_layers() const { return layers.size(); }
  const std::vector<int>& sampled(LayerPass pass) const
  {
    return pass == LayerPass::forward ? sampled_forward : sampled_backward;
  }
  // Harmony's rules at a u that was not sampled: times piecewise linear in u per layer (numpy.interp), peaks the
  // same truncated to an integer, X = u times the per-sample bytes. u outside the sampled range is an InputError.
  double time_s(LayerPass pass, int u, std::size_t layer) const;
  std::int64_t peak_bytes(LayerPass pass, int u, std::size_t layer) const;
  std::uint64_t input_bytes(int u, std::size_t layer) const;

  // Packs [first, last] (inclusive), summed in layer order as Harmony sums them.
  double pack_time_s(LayerPass pass, int u, std::size_t first, std::size_t last) const;
  // Σ peaks − Σ X of the inner layers (their inputs are outputs already counted).
  std::int64_t pack_memory_bytes(LayerPass pass, int u, std::size_t first, std::size_t last) const;
  std::uint64_t pack_weight_bytes(std::size_t first, std::size_t last) const;
  std::uint64_t pack_buffer_bytes(std::size_t first, std::size_t last) const;
  double pack_update_s(std::size_t first, std::size_t last) const;
};

// The authors' committed profiles converted to JSON ("harmony-profile", version 1). Errors name the file and the
// JSON path.
LayerProfile import_harmony_profile(const std::filesystem::path& path);

// memsim's own format; a "harmony-profile" document is imported.
LayerProfile load_layer_profile(const std::filesystem::path& path);
void save_layer_profile(const LayerProfile& profile, const std::filesystem::path& path);

} // namespace memsim
