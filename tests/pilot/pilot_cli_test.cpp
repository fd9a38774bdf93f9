// memsim pilot train | eval end to end on a tiny var-LSTM workload: both run, report accuracy and cost, the model
// file round-trips into eval, training is deterministic, and bad input exits 2 with a located message.
#include "test_files.hpp"

#include <gtest/gtest.h>

#include <string>

namespace memsim {
namespace {

const std::string kMemsim = MEMSIM_EXECUTABLE;
const std::string kTinyLstm =
    " --workload var-lstm --gen-param iterations=16 --gen-param min_len=2 --gen-param max_len=5"
    " --gen-param batch=64 --gen-param hidden=32 --gen-param embed=16 --gen-param vocab=64"
    " --gen-param classes=4 --machine titan-rtx-24gb-pcie3 --budget 1MiB";

TEST(PilotCli, TrainThenEval)
{
  const test::ScratchDir dir;
  const std::string model = (dir / "pilot.json").string();
  const std::string train = kMemsim + " pilot train" + kTinyLstm + " --epochs 50 --hidden 16 --max-blocks 16 -o ";
  const test::CommandResult trained = test::run_command(train + model);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("trained on 12 iterations, 50 epochs"), std::string::npos) << trained.output;
  EXPECT_NE(trained.output.find("held-out: 4 samples, accuracy"), std::string::npos) << trained.output;
  EXPECT_NE(trained.output.find("us per prediction"), std::string::npos) << trained.output;
  const test::CommandResult again = test::run_command(train + (dir / "again.json").string());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(test::read_file(dir / "pilot.json"), test::read_file(dir / "again.json"));

  const test::CommandResult evaluated =
      test::run_command(kMemsim + " pilot eval --model " + model + kTinyLstm.substr(0, kTinyLstm.find(" --machine")));
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.output;
  EXPECT_NE(evaluated.output.find(model + ": 16 samples, accuracy"), std::string::npos) << evaluated.output;
  EXPECT_NE(evaluated.output.find("parameters: "), std::string::npos) << evaluated.output;

  const test::CommandResult cnn = test::run_command(kMemsim + " pilot eval --type cnn --model " + model + kTinyLstm);
  EXPECT_EQ(cnn.exit_code, 2);
  EXPECT_NE(cnn.output.find("no trained network for type cnn"), std::string::npos) << cnn.output;
}

TEST(PilotCli, BadInputExitsTwo)
{
  const test::ScratchDir dir;
  const std::string out = " -o " + (dir / "p.json").string();
  const test::CommandResult neither =
      test::run_command(kMemsim + " pilot train --machine titan-rtx-24gb-pcie3 --budget 1MiB" + out);
  EXPECT_EQ(neither.exit_code, 2);
  EXPECT_NE(neither.output.find("--workload: give either"), std::string::npos) << neither.output;
  const test::CommandResult type = test::run_command(kMemsim + " pilot train --type gnn" + kTinyLstm + out);
  EXPECT_EQ(type.exit_code, 2);
  EXPECT_NE(type.output.find("--type: expected cnn, lstm or transformer"), std::string::npos) << type.output;
  const test::CommandResult param =
      test::run_command(kMemsim + " pilot train" + kTinyLstm + " --gen-param lenght=3" + out);
  EXPECT_EQ(param.exit_code, 2);
  EXPECT_NE(param.output.find("--gen-param"), std::string::npos) << param.output;
  const test::CommandResult model =
      test::run_command(kMemsim + " pilot eval --model " + (dir / "none.json").string() + " --trace x.json");
  EXPECT_EQ(model.exit_code, 2);
  EXPECT_NE(model.output.find("none.json"), std::string::npos) << model.output;
}

} // namespace
} // namespace memsim
