#pragma once
// Dynamic-network workloads (DyNN-Offload, HPCA 2024, Table II): multi-iteration traces whose graph changes with
// every iteration. One trace holds `iterations` training iterations (ops[].iteration); weights and Adam moments
// are one tensor each, shared by all iterations; activations, gradients and inputs belong to one iteration (names
// start with "it<k>."). The control-flow decisions of each iteration are the trace's `decisions`. Everything is
// drawn from `seed` with memsim's own generator (same seed, same bytes on every platform).
#include "memsim/traces/generators.hpp"

#include <cstdint>
#include <string>

namespace memsim {

// var-LSTM: a sequence classifier; per iteration the sequence length is drawn uniformly from [min_len, max_len]
// and the LSTM cell is unrolled once per step (the sequence embedded once; per step a select, gates, cell state,
// hidden state). Decisions: "step<t>"
// for every step taken.
struct VarLstmSpec {
  int iterations = 4;
  std::int64_t seed = 1;
  int min_len = 16;
  int max_len = 128;
  int batch = 64;
  int hidden = 512;
  int embed = 256;
  int vocab = 30000;
  int classes = 90;
  std::string dtype = "fp32";
};

// Tree-LSTM (binary, Tai et al.): per iteration a leaf count drawn uniformly from [min_leaves, max_leaves] and a
// binary tree over them, built by greedily merging the best-scoring pair of neighbours. A pair's score mixes a fixed
// "grammar" (one weight per leaf boundary, drawn once from the seed: sentences share structure, as parses do) with
// fresh per-iteration noise: (1 - shape_noise) x grammar + shape_noise x uniform. 0 gives the same tree for the same
// length; 1 a uniformly random merge order. The sentence is embedded once and every leaf selects its row, every
// internal node one Tree-LSTM cell (gates, cell state, hidden state), the root feeds a classifier. Decisions:
// "node[a,b)" for every internal node spanning leaves a..b-1.
struct TreeLstmSpec {
  int iterations = 4;
  std::int64_t seed = 1;
  int min_leaves = 5;
  int max_leaves = 30;
  double shape_noise = 0.2;
  int batch = 64;
  int hidden = 512;
  int vocab = 30000;
  int classes = 5;
  std::string dtype = "fp32";
};

// Mixture of experts: `layers` blocks, each a router over `experts` FFN experts; per iteration and layer every
// token group is sent to `top_k` distinct experts drawn by a seeded router (uniform), and only the chosen experts'
// ops appear (up and down projection per group and expert), then a combine op. Decisions: "l<l>.g<g>.e<e>".
struct MoeSpec {
  int iterations = 4;
  std::int64_t seed = 1;
  int layers = 4;
  int experts = 8;
  int top_k = 1;
  int groups = 8;        // token groups (the batch)
  int group_tokens = 64; // tokens per group
  int hidden = 512;
  int ffn = 2048;
  int classes = 1000;
  std::string dtype = "fp32";
};

// var-BERT: the transformer generator's encoder stack (embedding, layers, LM head) with the sequence length drawn
// uniformly from [min_seq, max_seq] per iteration. Decisions: "pos<t>" for every position present.
struct VarBertSpec {
  int iterations = 4;
  std::int64_t seed = 1;
  int min_seq = 32;
  int max_seq = 512;
  int layers = 12;
  int hidden = 768;
  int heads = 12;
  int batch = 32;
  int vocab = 30522;
  std::string dtype = "fp32";
};

Trace generate_var_lstm(const VarLstmSpec& spec, const Roofline& roofline);
Trace generate_tree_lstm(const TreeLstmSpec& spec, const Roofline& roofline);
Trace generate_moe(const MoeSpec& spec, const Roofline& roofline);
Trace generate_var_bert(const VarBertSpec& spec, const Roofline& roofline);

} // namespace memsim
