#include "memsim/planners/dynn/labels.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/dynn/problem.hpp"

#include <fmt/format.h>

#include <cmath>

namespace memsim::dynn {

std::vector<BlockVector> block_vectors(const FeatureMatrix& matrix, const Partition& partition)
{
  std::vector<BlockVector> blocks;
  std::size_t begin = 0;
  for (std::size_t end : partition) {
    BlockVector block{};
    block[0] = static_cast<double>(end - begin);
    for (std::size_t row = begin; row < end; ++row)
      for (std::size_t column = 0; column < kSignatureSize; ++column)
        block[1 + column] += matrix.rows.at(row)[column];
    blocks.push_back(block);
    begin = end;
  }
  return blocks;
}

std::vector<double> label_vector(const std::vector<BlockVector>& blocks, std::size_t max_blocks)
{
  if (blocks.size() > max_blocks)
    throw InputError("max_blocks", fmt::format("{} blocks do not fit the label's {} slots", blocks.size(), max_blocks));
  std::vector<double> label(max_blocks * kBlockVectorSize, 0.0);
  for (std::size_t j = 0; j < blocks.size(); ++j)
    std::copy(blocks[j].begin(), blocks[j].end(), label.begin() + static_cast<std::ptrdiff_t>(j * kBlockVectorSize));
  return label;
}

std::optional<Partition> partition_from_label(const std::vector<double>& label, std::size_t op_count)
{
  Partition partition;
  std::size_t end = 0;
  for (std::size_t slot = 0; slot * kBlockVectorSize < label.size(); ++slot) {
    const double ops = std::round(label[slot * kBlockVectorSize]);
    if (!(ops >= 1))
      break;
    end += static_cast<std::size_t>(ops);
    if (end > op_count)
      return std::nullopt;
    partition.push_back(end);
  }
  if (end != op_count)
    return std::nullopt;
  return partition;
}

bool label_matches(const std::vector<double>& predicted, const std::vector<double>& label, double dims_tolerance)
{
  if (predicted.size() != label.size())
    return false;
  for (std::size_t i = 0; i < label.size(); ++i) {
    const std::size_t column = i % kBlockVectorSize;
    if (column <= kIdiomCount) { // the op count and the idiom counts are integers
      if (std::round(predicted[i]) != std::round(label[i]))
        return false;
    } else if (std::abs(predicted[i] - label[i]) > dims_tolerance * std::max(1.0, std::abs(label[i]))) {
      return false;
    }
  }
  return true;
}

std::vector<IterationLabel> iteration_labels(const Trace& trace, const Machine& machine, std::uint64_t capacity_bytes)
{
  std::vector<IterationLabel> labels;
  for (const IterationProblem& problem : iteration_problems(trace, machine, capacity_bytes)) {
    IterationLabel label;
    label.iteration = problem.iteration;
    label.ops = problem.ops;
    label.matrix = feature_matrix(trace, problem.ops);
    const BlockIndex index(problem.problem);
    label.partition = partition_dp(index).partition;
    label.blocks = block_vectors(label.matrix, label.partition);
    labels.push_back(std::move(label));
  }
  return labels;
}

} // namespace memsim::dynn
