// The plain-C++ pilot (pilot_model.hpp): a worked-out forward pass through LeakyReLU on a hand-made network, the
// "present" logit dropping a slot, and located errors for documents that are not usable pilots.
#include "pilot_fixtures.hpp"
#include "test_files.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/dynn/pilot_model.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace memsim {
namespace {

using ::testing::HasSubstr;

const dynn::PilotShape kOneSlot{1, 0}; // 20 inputs, a 10-value label, 11 outputs

// 20 -> 2 -> 2 -> 11: h = leaky([x0, -x0]); g = leaky(h + [0, 1]); label[0] = g0 + g1, present = g1 - 1.5.
// Normalization: x0 = (input[0] - 1) / 2, label[0] = 2 * output + 1.
nlohmann::json worked_pilot()
{
  std::vector<double> first(2 * 20, 0.0);
  first[0] = 1;
  first[20] = -1;
  std::vector<double> last(11 * 2, 0.0);
  last[0] = 1; // output 0 = g0 + g1
  last[1] = 1;
  last[21] = 1; // output 10 = g1 - 1.5
  std::vector<double> last_bias(11, 0.0);
  last_bias[10] = -1.5;
  const nlohmann::json parameters =
      nlohmann::json::array({{{"name", "0.weight"}, {"shape", {2, 20}}, {"values", first}},
                             {{"name", "0.bias"}, {"shape", {2}}, {"values", {0, 0}}},
                             {{"name", "2.weight"}, {"shape", {2, 2}}, {"values", {1, 0, 0, 1}}},
                             {{"name", "2.bias"}, {"shape", {2}}, {"values", {0, 1}}},
                             {{"name", "4.weight"}, {"shape", {11, 2}}, {"values", last}},
                             {{"name", "4.bias"}, {"shape", {11}}, {"values", last_bias}}});
  nlohmann::json document = test::pilot_document(kOneSlot, parameters);
  document["normalization"]["input"]["mean"][0] = 1.0;
  document["normalization"]["input"]["scale"][0] = 2.0;
  document["normalization"]["label"]["mean"][0] = 1.0;
  document["normalization"]["label"]["scale"][0] = 2.0;
  return document;
}

std::vector<double> input_with(double first)
{
  std::vector<double> input(kOneSlot.input_size(), 0.0);
  input[0] = first;
  return input;
}

TEST(PilotInference, WorkedForwardPass)
{
  const dynn::PilotInference pilot = dynn::PilotInference::from_json(worked_pilot(), "worked");
  EXPECT_EQ(pilot.default_type(), dynn::NetworkType::lstm);
  // input -1: x0 = -1, h = [-0.01, 1], g = [-0.0001, 2]: label[0] = 2 * 1.9999 + 1, present 0.5.
  std::vector<double> label = pilot.predict(input_with(-1), dynn::NetworkType::lstm);
  ASSERT_EQ(label.size(), 10u);
  EXPECT_NEAR(label[0], 4.9998, 1e-12);
  for (std::size_t i = 1; i < label.size(); ++i)
    EXPECT_EQ(label[i], 0.0);
  // input 5: x0 = 2, h = [2, -0.02], g = [2, 0.98]: present -0.52, the slot is empty.
  label = pilot.predict(input_with(5), dynn::NetworkType::lstm);
  EXPECT_EQ(label, std::vector<double>(10, 0.0));
}

TEST(PilotInference, ConstantPilotDecodesToItsBlocks)
{
  const dynn::PilotShape shape{4, 2};
  const dynn::PilotInference pilot = dynn::PilotInference::from_json(test::constant_pilot({2, 1, 3}, shape), "c");
  const std::vector<double> label =
      pilot.predict(std::vector<double>(shape.input_size(), 7.0), dynn::NetworkType::lstm);
  EXPECT_EQ(dynn::partition_from_label(label, 6), (dynn::Partition{2, 3, 6}));
  EXPECT_EQ(dynn::partition_from_label(label, 7), std::nullopt);
}

template <typename Call>
std::string located_error(Call&& call)
{
  try {
    call();
  } catch (const InputError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no InputError";
  return {};
}

TEST(PilotInference, BadDocumentsAreLocated)
{
  nlohmann::json document = worked_pilot();
  document["format"] = "memsim-plan";
  EXPECT_THAT(located_error([&] { dynn::PilotInference::from_json(document, "p.json"); }),
              HasSubstr("p.json: not a memsim-pilot v1 document"));

  document = worked_pilot();
  document["networks"][1]["parameters"][2]["values"] = {1, 0, 0};
  EXPECT_THAT(located_error([&] { dynn::PilotInference::from_json(document, "p.json"); }),
              HasSubstr("p.json: at /networks/1/parameters/2"));

  document = worked_pilot();
  document["networks"][1]["parameters"].erase(3); // 2.bias
  EXPECT_THAT(located_error([&] { dynn::PilotInference::from_json(document, "p.json"); }), HasSubstr("layer 2"));

  document = worked_pilot();
  document["normalization"]["label"]["scale"] = {1.0};
  EXPECT_THAT(located_error([&] { dynn::PilotInference::from_json(document, "p.json"); }),
              HasSubstr("p.json: at /normalization"));

  const dynn::PilotInference pilot = dynn::PilotInference::from_json(worked_pilot(), "worked");
  EXPECT_THAT(located_error([&] { pilot.predict(input_with(1), dynn::NetworkType::cnn); }),
              HasSubstr("no trained network for type cnn"));
  EXPECT_THAT(located_error([&] { pilot.predict({1.0}, dynn::NetworkType::lstm); }), HasSubstr("1 inputs"));

  test::ScratchDir dir;
  EXPECT_THAT(located_error([&] { dynn::PilotInference::load(dir / "missing.json"); }), HasSubstr("missing.json"));
  test::write_file(dir / "broken.json", "{\"format\": ");
  EXPECT_THAT(located_error([&] { dynn::PilotInference::load(dir / "broken.json"); }), HasSubstr("broken.json"));
}

} // namespace
} // namespace memsim
