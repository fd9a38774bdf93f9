// `memsim import`, `memsim gen preset` / `gen --list`, `memsim trace info` and `memsim trace plot` end to end.
#include "test_files.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace memsim {
namespace {

const std::filesystem::path kData = std::filesystem::path(MEMSIM_TEST_DATA_DIR) / "data";

std::string memsim(const std::string& arguments) { return std::string(MEMSIM_EXECUTABLE) + " " + arguments; }

TEST(TraceCli, ImportDtrThenInfoJsonGivesTheLogsNumbers)
{
  test::ScratchDir dir;
  const auto imported = test::run_command(memsim("import dtr " + (kData / "small.dtr.log").string() + " -o " +
                                                 (dir / "dtr.trace.json.gz").string()));
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_NE(imported.output.find("compute 0.002901 s"), std::string::npos) << imported.output;
  const auto info = test::run_command(memsim("trace info --json " + (dir / "dtr.trace.json.gz").string()), true);
  ASSERT_EQ(info.exit_code, 0) << info.output;
  const auto json = nlohmann::json::parse(info.output);
  EXPECT_EQ(json["ops"], 5);
  EXPECT_EQ(json["default_peak_bytes"], 9104);
  EXPECT_DOUBLE_EQ(json["total_time_s"].get<double>(), 2.901e-3);
  EXPECT_EQ(json["tensors_by_kind"]["weight"]["bytes"], 1100);
  EXPECT_EQ(json["activation_bytes"], 8004);
  EXPECT_TRUE(json.contains("chain_view"));
  const auto text = test::run_command(memsim("trace info " + (dir / "dtr.trace.json.gz").string()));
  EXPECT_NE(text.output.find("default_peak_bytes: 9104"), std::string::npos) << text.output;
}

TEST(TraceCli, ImportCheckmateAndPytorchEg)
{
  test::ScratchDir dir;
  auto checkmate = test::run_command(memsim("import checkmate " + (kData / "small.checkmate.json").string() +
                                            " --seconds-per-cost 0.5 -o " + (dir / "c.trace.json").string()));
  ASSERT_EQ(checkmate.exit_code, 0) << checkmate.output;
  EXPECT_NE(checkmate.output.find("total_time_s 3.500000, default_peak_bytes 304"), std::string::npos)
      << checkmate.output;
  auto eg =
      test::run_command(memsim("import pytorch-eg " + (kData / "linear.eg.json").string() + " --profile " +
                               (kData / "linear.profile.json").string() + " -o " + (dir / "e.trace.json").string()));
  ASSERT_EQ(eg.exit_code, 0) << eg.output;
  auto info = test::run_command(memsim("trace info --json " + (dir / "e.trace.json").string()), true);
  const auto json = nlohmann::json::parse(info.output);
  EXPECT_GT(json["total_time_s"].get<double>(), 0.0);
  EXPECT_GT(json["ops_by_phase"]["backward"]["count"].get<int>(), 0);
}

TEST(TraceCli, GenListsThePresetsAndWritesOne)
{
  const auto list = test::run_command(memsim("gen --list"));
  ASSERT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("25557032  ResNet-50 (bottleneck"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("gpt2-100b"), std::string::npos) << list.output;
  test::ScratchDir dir;
  const auto trace = dir / "resnet50.trace.json";
  const auto gen = test::run_command(memsim("gen preset --model resnet50 --batch 4 --depth 0.5 --machine "
                                            "v100-32gb-pcie3 --out " +
                                            trace.string()));
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  const auto info = test::run_command(memsim("trace info --json " + trace.string()), true);
  ASSERT_EQ(info.exit_code, 0) << info.output;
  const auto json = nlohmann::json::parse(info.output);
  EXPECT_EQ(json["chain_view"], true) << info.output;
  // Depth 0.5: 2-2-3-2 bottleneck blocks (1.5 rounds to 2), plus the stem and the head.
  EXPECT_EQ(json["chain_layers"], 11) << info.output;
  EXPECT_EQ(test::run_command(memsim("gen preset --model resnet51 --machine v100-32gb-pcie3 --out " + trace.string()))
                .exit_code,
            2);
  EXPECT_EQ(test::run_command(memsim("gen")).exit_code, 2);
}

// A dynamic trace from the command line: twice the same bytes for one seed, and its decisions summarized (var-lstm
// with lengths 2..2: every iteration takes steps 0 and 1, so every distance is 0).
TEST(TraceCli, GenVarLstmThenDecisions)
{
  test::ScratchDir dir;
  const std::string args = "gen var-lstm --iterations 3 --min-len 2 --max-len 2 --batch 2 --hidden 8 --embed 4 "
                           "--vocab 16 --classes 3 --seed 5 --machine v100-32gb-pcie3 --out ";
  ASSERT_EQ(test::run_command(memsim(args + (dir / "a.trace.json").string())).exit_code, 0);
  ASSERT_EQ(test::run_command(memsim(args + (dir / "b.trace.json").string())).exit_code, 0);
  EXPECT_EQ(test::read_file(dir / "a.trace.json"), test::read_file(dir / "b.trace.json"));
  const auto decisions = test::run_command(memsim("trace decisions --json " + (dir / "a.trace.json").string()), true);
  ASSERT_EQ(decisions.exit_code, 0) << decisions.output;
  const auto json = nlohmann::json::parse(decisions.output);
  EXPECT_EQ(json["iterations"], 3);
  EXPECT_EQ(json["jaccard_to_first"], nlohmann::json({0.0, 0.0, 0.0}));
  EXPECT_EQ(json["table_i_shares"], nlohmann::json({1.0, 0.0, 0.0, 0.0, 0.0}));
  // A trace without decisions is refused with exit 2.
  const auto resnet = dir / "r.trace.json";
  ASSERT_EQ(test::run_command(memsim("gen cnn --depth 2 --batch 1 --image 8 --machine v100-32gb-pcie3 --out " +
                                     resnet.string()))
                .exit_code,
            0);
  const auto refused = test::run_command(memsim("trace decisions " + resnet.string()));
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.output.find("records no decisions"), std::string::npos) << refused.output;
}

TEST(TraceCli, PlotWritesAPng)
{
  test::ScratchDir dir;
  const auto out = dir / "memory.png";
  auto plot =
      test::run_command(memsim("trace plot " + (kData / "small.checkmate.json").string() + " --out " + out.string()));
  // A Checkmate graph is not a trace: plot reads traces only, and says where.
  EXPECT_EQ(plot.exit_code, 2) << plot.output;
  auto imported = test::run_command(memsim("import dtr " + (kData / "small.dtr.log").string() + " -o " +
                                           (dir / "t.trace.json").string()));
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  plot = test::run_command(memsim("trace plot " + (dir / "t.trace.json").string() + " --out " + out.string() +
                                  " --keep-data"));
  ASSERT_EQ(plot.exit_code, 0) << plot.output;
  const std::string png = test::read_file(out);
  ASSERT_GT(png.size(), 1000u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  // The data behind the plot: one row per op, bytes in use as in the default schedule.
  const std::string csv = test::read_file(out.string() + ".csv");
  EXPECT_NE(csv.find("4,backward,0,0.002601,0.002901,9104"), std::string::npos) << csv;
}

// A layer profile is its own file format; Harmony's estimate reads it or the Harmony document alike.
TEST(TraceCli, ImportHarmonyProfileThenEstimateAndSearch)
{
  test::ScratchDir dir;
  const std::string harmony = (kData / "tiny.harmony-profile.json").string();
  const std::string layers = (dir / "tiny.layers.json").string();
  const auto imported = test::run_command(memsim("import harmony-profile " + harmony + " -o " + layers));
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_NE(imported.output.find("3 layers, 3 forward and 2 backward microbatch sizes (1..4)"), std::string::npos)
      << imported.output;
  const std::string config =
      " --gpus 2 --minibatch 6 --mode pp --u-fwd 3 --u-bwd 2 --packs-fwd 0-0 --packs-bwd 0-0,1-2";
  const auto from_layers = test::run_command(memsim("harmony estimate --profile " + layers + config), true);
  const auto from_harmony = test::run_command(memsim("harmony estimate --profile " + harmony + config), true);
  ASSERT_EQ(from_layers.exit_code, 0) << from_layers.output;
  EXPECT_EQ(from_layers.output, from_harmony.output);
  EXPECT_NE(from_layers.output.find("tiny pp N=2 D=6 u_fwd=3 |P_F|=1 u_bwd=2 |P_B|=2"), std::string::npos)
      << from_layers.output;
  const auto search =
      test::run_command(memsim("harmony search --profile " + layers + " --gpus 2 --minibatch 4 --mode dp"), true);
  ASSERT_EQ(search.exit_code, 0) << search.output;
  EXPECT_NE(search.output.find("packs_bwd 0-2"), std::string::npos) << search.output; // 10 GiB holds everything
  const auto bad = test::run_command(memsim("harmony estimate --profile " + layers +
                                            " --gpus 2 --minibatch 6 --mode pp --u-fwd 5 --u-bwd 2 --packs-fwd 0-0 "
                                            "--packs-bwd 0-0,1-2"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--u-fwd"), std::string::npos) << bad.output;
}

// memsim harmony profile: generated traces of one model at two batch sizes become a layer profile that search reads.
TEST(TraceCli, HarmonyProfileFromGeneratedTracesThenSearch)
{
  test::ScratchDir dir;
  std::string traces;
  for (const char* batch : {"2", "4"}) {
    const std::string out = (dir / (std::string("t") + batch + ".json")).string();
    const auto generated =
        test::run_command(memsim(std::string("gen transformer --layers 2 --hidden 64 --heads 2 --seq 16 --vocab 100 "
                                             "--machine h200 --batch ") +
                                 batch + " --out " + out));
    ASSERT_EQ(generated.exit_code, 0) << generated.output;
    traces += " --trace " + out;
  }
  const std::string profile = (dir / "t.layers.json").string();
  const auto made = test::run_command(memsim("harmony profile" + traces + " --model tiny-transformer -o " + profile));
  ASSERT_EQ(made.exit_code, 0) << made.output;
  EXPECT_NE(made.output.find("tiny-transformer: 4 layers, u = 2,4"), std::string::npos) << made.output;
  const auto again = test::run_command(memsim("harmony profile" + traces + " --model tiny-transformer -o " +
                                              (dir / "again.json").string()));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(test::read_file(profile), test::read_file(dir / "again.json"));
  const auto search = test::run_command(
      memsim("harmony search --profile " + profile + " --gpus 2 --minibatch 4 --mode pp --time-del 0"), true);
  ASSERT_EQ(search.exit_code, 0) << search.output;
  EXPECT_NE(search.output.find("tiny-transformer pp N=2 D=4: best of"), std::string::npos) << search.output;

  const std::string other = (dir / "cnn.json").string();
  ASSERT_EQ(test::run_command(memsim("gen cnn --depth 2 --image 32 --batch 8 --machine h200 --out " + other)).exit_code,
            0);
  const auto mismatched = test::run_command(memsim("harmony profile" + traces + " --trace " + other + " -o " +
                                                   (dir / "bad.json").string()));
  EXPECT_EQ(mismatched.exit_code, 2);
  EXPECT_NE(mismatched.output.find(other + ": not the same model as"), std::string::npos) << mismatched.output;
  EXPECT_EQ(test::run_command(memsim("harmony profile --help")).exit_code, 0);
}

} // namespace
} // namespace memsim
