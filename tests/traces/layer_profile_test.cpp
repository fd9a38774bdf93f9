// Layer profiles: Harmony's interpolation rules on a hand-written profile (values worked out in the comments),
// located errors for bad input, and memsim's own file format round trip.
#include "memsim/common/error.hpp"
#include "memsim/traces/layer_profile.hpp"

#include "test_files.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace memsim {
namespace {

const std::filesystem::path kTiny = std::filesystem::path(MEMSIM_TEST_DATA_DIR) / "data" / "tiny.harmony-profile.json";

std::string error_of(const std::function<void()>& action)
{
  try {
    action();
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

// Sampled: forward u = 1, 2, 4; backward u = 1, 4.
TEST(LayerProfile, SampledValuesAreReadAsGiven)
{
  const LayerProfile profile = import_harmony_profile(kTiny);
  ASSERT_EQ(profile.num_layers(), 3u);
  EXPECT_EQ(profile.model, "tiny");
  EXPECT_EQ(profile.sampled_forward, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(profile.sampled_backward, (std::vector<int>{1, 4}));
  EXPECT_EQ(profile.layers[1].weight_bytes, 200u);
  EXPECT_EQ(profile.layers[1].buffer_bytes, 8u);
  EXPECT_EQ(profile.layers[0].input_bytes_per_sample, 32u); // int64 x 4
  EXPECT_EQ(profile.layers[1].input_bytes_per_sample, 40u); // float32 x 10
  EXPECT_DOUBLE_EQ(profile.time_s(LayerPass::forward, 2, 1), 0.4);
  EXPECT_DOUBLE_EQ(profile.time_s(LayerPass::backward, 4, 0), 1.2);
  EXPECT_EQ(profile.peak_bytes(LayerPass::backward, 1, 1), 5000);
  EXPECT_EQ(profile.input_bytes(2, 1), 80u);
}

TEST(LayerProfile, UnsampledSizesInterpolateAsHarmonyDoes)
{
  const LayerProfile profile = import_harmony_profile(kTiny);
  // Forward layer 1 at u=3: between u=2 (0.4) and u=4 (1.0): 0.4 + 0.3 = 0.7.
  EXPECT_NEAR(profile.time_s(LayerPass::forward, 3, 1), 0.7, 1e-15);
  // Backward has its own samples (1, 4): layer 1 at u=2: 0.6 + (2.4-0.6)/3 = 1.2; layer 0 at u=3: 0.3 + 2*0.3 = 0.9.
  EXPECT_NEAR(profile.time_s(LayerPass::backward, 2, 1), 1.2, 1e-15);
  EXPECT_NEAR(profile.time_s(LayerPass::backward, 3, 0), 0.9, 1e-15);
  // Peaks interpolate then truncate: backward layer 2 at u=2: 800 + (2001-800)/3 = 1200.33 -> 1200.
  EXPECT_EQ(profile.peak_bytes(LayerPass::backward, 2, 2), 1200);
  EXPECT_EQ(profile.peak_bytes(LayerPass::forward, 3, 0), 2000); // 1500 + 1000/2
  // X is not interpolated: u times the per-sample bytes of the u=1 shapes.
  EXPECT_EQ(profile.input_bytes(3, 1), 120u);
  EXPECT_EQ(profile.input_bytes(7, 0), 224u);
  // Packs: forward [0,1] at u=3 = 2000 + (3000 + 2000/2) - X(3,1) = 2000 + 4000 - 120.
  EXPECT_EQ(profile.pack_memory_bytes(LayerPass::forward, 3, 0, 1), 5880);
  EXPECT_NEAR(profile.pack_time_s(LayerPass::forward, 3, 0, 2), 0.3 + 0.7 + 0.15, 1e-15);
  EXPECT_EQ(profile.pack_weight_bytes(0, 2), 300u);
  EXPECT_EQ(profile.pack_buffer_bytes(0, 2), 8u);
  EXPECT_DOUBLE_EQ(profile.pack_update_s(0, 1), 1.5);
  // No extrapolation.
  EXPECT_NE(error_of([&] { (void)profile.time_s(LayerPass::forward, 5, 0); }).find("outside"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)profile.time_s(LayerPass::backward, 0, 0); }).find("outside"), std::string::npos);
}

TEST(LayerProfile, SavedProfileLoadsBackIdentically)
{
  test::ScratchDir dir;
  const LayerProfile profile = import_harmony_profile(kTiny);
  save_layer_profile(profile, dir / "tiny.layers.json");
  const LayerProfile loaded = load_layer_profile(dir / "tiny.layers.json");
  EXPECT_EQ(loaded.sampled_backward, profile.sampled_backward);
  for (const int u : {1, 2, 3, 4})
    for (std::size_t l = 0; l < 3; ++l) {
      EXPECT_EQ(loaded.time_s(LayerPass::forward, u, l), profile.time_s(LayerPass::forward, u, l));
      EXPECT_EQ(loaded.time_s(LayerPass::backward, u, l), profile.time_s(LayerPass::backward, u, l));
      EXPECT_EQ(loaded.peak_bytes(LayerPass::backward, u, l), profile.peak_bytes(LayerPass::backward, u, l));
      EXPECT_EQ(loaded.input_bytes(u, l), profile.input_bytes(u, l));
    }
  save_layer_profile(loaded, dir / "again.json");
  EXPECT_EQ(test::read_file(dir / "again.json"), test::read_file(dir / "tiny.layers.json"));
  // The loader also takes the Harmony document itself.
  EXPECT_EQ(load_layer_profile(kTiny).layers[2].name, "vLayer2: CrossEntropyLoss");
}

std::string import_error(const std::string& from, const std::string& to)
{
  test::ScratchDir dir;
  std::string text = test::read_file(kTiny);
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  test::write_file(dir / "bad.json", text);
  return error_of([&] { (void)import_harmony_profile(dir / "bad.json"); });
}

TEST(LayerProfile, BadInputIsLocatedByFileAndJsonPath)
{
  EXPECT_NE(import_error("[0.2,0.4,0.1]", "[0.2,0.4]").find("bad.json: at /microbatch/2/fwd_time_s: has 2 values"),
            std::string::npos);
  EXPECT_NE(import_error("\"weight_bytes\":200", "\"weight_bytes\":-200").find("at /layers/1/weight_bytes: negative"),
            std::string::npos);
  EXPECT_NE(import_error("\"bwd\":[1,4]", "\"bwd\":[4,1]").find("at /sampled_u/bwd/1: microbatch sizes must ascend"),
            std::string::npos);
  EXPECT_NE(import_error("\"bwd\":[1,4]", "\"bwd\":[1,3]").find("at /sampled_u/bwd/1: backward size 3"),
            std::string::npos);
  EXPECT_NE(import_error("\"input_bytes\":[64,80,40]", "\"input_bytes\":null").find("at /microbatch/2/input_bytes"),
            std::string::npos);
  EXPECT_NE(import_error("\"4\":{", "\"5\":{").find("at /microbatch"), std::string::npos);
  EXPECT_NE(import_error("\"float32\"]]},\n{\"index\":2", "\"complex\"]]},\n{\"index\":2").find("unknown dtype"),
            std::string::npos);
  EXPECT_NE(import_error("\"version\":1", "\"version\":2").find("at /version"), std::string::npos);
  EXPECT_NE(import_error("\"num_layers\":3", "\"num_layers\":4").find("at /layers: has 3 layers"), std::string::npos);
}

} // namespace
} // namespace memsim
