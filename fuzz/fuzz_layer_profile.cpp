// The layer-profile loader (`memsim import harmony-profile`, and memsim's own memsim-layer-profile format, which the
// Harmony estimator reads): bad input must be a located error; what loads must be usable -- every layer's time,
// peak and input bytes at each sampled size and halfway between sampled sizes -- and must save and load back the same.
#include "fuzz_input.hpp"

#include "memsim/traces/layer_profile.hpp"

#include <optional>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  using namespace memsim;
  const auto path = fuzz::input_file(data, size, ".json");
  std::optional<LayerProfile> profile;
  fuzz::expect_located_errors([&] { profile = load_layer_profile(path); });
  if (!profile)
    return 0;
  fuzz::expect_located_errors([&] {
    for (LayerPass pass : {LayerPass::forward, LayerPass::backward}) {
      const std::vector<int>& sizes = profile->sampled(pass);
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        const int u = i + 1 < sizes.size() ? sizes[i] + (sizes[i + 1] - sizes[i]) / 2 : sizes[i];
        for (std::size_t layer = 0; layer < profile->num_layers(); ++layer) {
          (void)profile->time_s(pass, u, layer);
          (void)profile->peak_bytes(pass, u, layer);
          (void)profile->input_bytes(u, layer);
        }
        if (profile->num_layers() > 0)
          (void)profile->pack_memory_bytes(pass, u, 0, profile->num_layers() - 1);
      }
    }
  });
  const auto written =
      std::filesystem::temp_directory_path() / ("memsim-fuzz-" + std::to_string(::getpid()) + "-saved.json");
  save_layer_profile(*profile, written);
  try {
    const LayerProfile again = load_layer_profile(written);
    const auto rewritten = written.string() + ".again";
    save_layer_profile(again, rewritten);
    if (read_text_file(written) != read_text_file(rewritten)) {
      std::fprintf(stderr, "memsim-fuzz: a saved layer profile does not load back the same\n");
      std::abort();
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "memsim-fuzz: a saved layer profile does not load: %s\n", error.what());
    std::abort();
  }
  return 0;
}
