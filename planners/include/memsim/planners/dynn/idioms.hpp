#pragma once
// DyNN-Offload's idiom-based operator signature and architecture feature matrix (Ren et al., HPCA 2024, §IV-A;
// spec dynn-offload.md §1.3, §2.4). An operator is described by how often each of six loop idioms occurs in its
// implementation (transpose, gather, scatter, reduction, stream, stencil) plus the per-axis sums of its input
// tensors' dimensions. The paper finds the idioms with an LLVM tool; memsim keeps its own hand-made table over the
// op types its generators and importers emit (idioms.cpp says why each class gets its counts).
#include "memsim/traces/trace.hpp"

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace memsim::dynn {

inline constexpr std::size_t kIdiomCount = 6; // transpose, gather, scatter, reduction, stream, stencil
using IdiomCounts = std::array<int, kIdiomCount>;

// The idiom counts of an op type, or nothing when the table does not know it. "X_backward" is looked up as its own
// entry when the table has one, else as the backward of X's class.
std::optional<IdiomCounts> idiom_counts(std::string_view op_type);

// The 9-vector of §1.3: the six idiom counts, then the sums over the op's input tensors of dimension 0, 1 and 2
// (0 where a tensor has fewer axes; axes past the third are folded into the third as a product, so that the sum
// of elements stays visible). When some input has no shape, the spec's fallback replaces the three sums:
// [sum of input elements / 1e6, sum of output elements / 1e6, number of inputs].
inline constexpr std::size_t kSignatureSize = kIdiomCount + 3;
using OpSignature = std::array<double, kSignatureSize>;

struct SignedOp {
  OpSignature signature{};
  bool known_type = true; // false: the table has no entry, the idiom counts are zeros
};
SignedOp op_signature(const Trace& trace, const Op& op);

// The architecture feature matrix of an op sequence: one row per op in program order (the sequence's order).
// memsim's traces record which control-flow decisions an iteration took but not where they sit among its ops, so
// the matrix has no control-flow rows (the paper's zero rows); see DYNAMIC.md.
struct FeatureMatrix {
  std::vector<OpSignature> rows;
  std::size_t unknown_types = 0; // rows whose op type the idiom table lacks (idioms all zero)
};
FeatureMatrix feature_matrix(const Trace& trace, const std::vector<OpId>& ops);

// The static architecture the pilot sees for a model (input-independent, as the paper's AFM built from the model
// script): one row per distinct op type of the forward phase, in order of first appearance in `ops`, idiom counts
// only (the script's shapes are symbolic, so the three dimension sums are 0). Truncated to `max_rows`.
std::vector<OpSignature> static_architecture(const Trace& trace, const std::vector<OpId>& ops, std::size_t max_rows);

} // namespace memsim::dynn
