// BlockIndex: per-tensor accesses and the longest feasible block from each op (a sliding window: a sub-range of a
// feasible block is feasible, so the longest end never decreases with the start).
#include "memsim/planners/dynn/blocks.hpp"

#include <algorithm>
#include <deque>
#include <stdexcept>

namespace memsim::dynn {

BlockIndex::BlockIndex(const BlockProblem& problem) : problem_(&problem)
{
  const std::size_t n = problem.ops.size();
  const std::size_t tensors = problem.bytes.size();
  if (problem.needed_after.size() != tensors)
    throw std::invalid_argument("dynn blocks: needed_after must have one entry per tensor");
  accesses_.resize(tensors);
  first_write_.assign(tensors, n);
  producer_.assign(tensors, n);
  time_prefix_.assign(n + 1, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const BlockOp& op = problem.ops[i];
    time_prefix_[i + 1] = time_prefix_[i] + op.time_s;
    auto check = [&](std::uint32_t t) {
      if (t >= tensors || std::find(op.tensors.begin(), op.tensors.end(), t) == op.tensors.end())
        throw std::invalid_argument("dynn blocks: an op writes a tensor it does not list");
    };
    for (std::uint32_t t : op.tensors) {
      if (t >= tensors)
        throw std::invalid_argument("dynn blocks: tensor index out of range");
      if (accesses_[t].empty() || accesses_[t].back() != i)
        accesses_[t].push_back(static_cast<std::uint32_t>(i));
    }
    for (std::uint32_t t : op.produced) {
      check(t);
      producer_[t] = std::min(producer_[t], i);
      first_write_[t] = std::min(first_write_[t], i);
    }
    for (std::uint32_t t : op.updated) {
      check(t);
      first_write_[t] = std::min(first_write_[t], i);
    }
  }

  // Sliding window [begin, end): tensor use counts, their bytes, and the largest workspace (monotonic deque).
  longest_end_.assign(n + 1, n);
  std::vector<std::uint32_t> uses(tensors, 0);
  std::uint64_t bytes = 0;
  std::deque<std::size_t> workspace; // op indices with decreasing workspace
  std::size_t end = 0;
  auto fits_with = [&](std::size_t op) {
    std::uint64_t added = 0;
    for (std::uint32_t t : problem.ops[op].tensors)
      if (uses[t] == 0)
        added += problem.bytes[t];
    std::uint64_t largest = problem.ops[op].workspace_bytes;
    if (!workspace.empty())
      largest = std::max(largest, problem.ops[workspace.front()].workspace_bytes);
    return bytes + added + largest <= problem.capacity;
  };
  for (std::size_t begin = 0; begin < n; ++begin) {
    if (end < begin)
      end = begin; // an op that does not fit alone left the window empty
    while (end < n && fits_with(end)) {
      for (std::uint32_t t : problem.ops[end].tensors)
        if (uses[t]++ == 0)
          bytes += problem.bytes[t];
      while (!workspace.empty() && problem.ops[workspace.back()].workspace_bytes <= problem.ops[end].workspace_bytes)
        workspace.pop_back();
      workspace.push_back(end);
      ++end;
    }
    longest_end_[begin] = end;
    longest_block_ = std::max(longest_block_, end - begin);
    if (end > begin) { // drop op `begin` from the window
      for (std::uint32_t t : problem.ops[begin].tensors)
        if (--uses[t] == 0)
          bytes -= problem.bytes[t];
      if (!workspace.empty() && workspace.front() == begin)
        workspace.pop_front();
    }
  }
}

std::uint64_t BlockIndex::block_bytes(std::size_t begin, std::size_t end) const
{
  std::vector<std::uint32_t> seen;
  std::uint64_t bytes = 0;
  std::uint64_t largest = 0;
  for (std::size_t i = begin; i < end; ++i) {
    largest = std::max(largest, problem_->ops[i].workspace_bytes);
    for (std::uint32_t t : problem_->ops[i].tensors)
      if (std::find(seen.begin(), seen.end(), t) == seen.end()) {
        seen.push_back(t);
        bytes += problem_->bytes[t];
      }
  }
  return bytes + largest;
}

std::size_t BlockIndex::next_access(std::uint32_t t, std::size_t from) const
{
  const auto& list = accesses_[t];
  auto it = std::lower_bound(list.begin(), list.end(), from);
  return it == list.end() ? op_count() : *it;
}

std::ptrdiff_t BlockIndex::previous_access(std::uint32_t t, std::size_t before) const
{
  const auto& list = accesses_[t];
  auto it = std::lower_bound(list.begin(), list.end(), before);
  return it == list.begin() ? -1 : static_cast<std::ptrdiff_t>(*(it - 1));
}

bool BlockIndex::used_from(std::uint32_t t, std::size_t from) const
{
  return next_access(t, from) < op_count() || problem_->needed_after[t] != 0;
}

} // namespace memsim::dynn
