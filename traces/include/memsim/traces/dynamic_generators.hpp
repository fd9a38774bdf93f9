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

// What every dynamic generator takes: how many iterations the trace holds, the seed of their decisions, the element
// type.
struct DynamicSpec {
  int iterations = 4;
  std::int64_t seed = 1;
  std::string dtype = "fp32";
};

// var-LSTM: a sequence classifier; per iteration the sequence length is drawn uniformly from [min_len, max_len]
// and the LSTM cell is unrolled once per step (the sequence embedded once; per step a select, gates, cell state,
// hidden state). Decisions: "step<t>" for every step taken.
struct VarLstmSpec : DynamicSpec {
  int min_len = 16;
  int max_len = 128;
  int batch = 64;
  int hidden = 512;
  int embed = 256;
  int vocab = 30000;
  int classes = 90;
};

// Tree-LSTM (binary, Tai et al.): per iteration a leaf count drawn uniformly from [min_leaves, max_leaves] and a
// binary tree over them, built by greedily merging the best-scoring pair of neighbours. A pair's score mixes a fixed
// "grammar" (one weight per leaf boundary, drawn once from the seed: sentences share structure, as parses do) with
// fresh per-iteration noise: (1 - shape_noise) x grammar + shape_noise x uniform. 0 gives the same tree for the same
// length; 1 a uniformly random merge order. The sentence is embedded once and every leaf selects its row, every
// internal node one Tree-LSTM cell (gates, cell state, hidden state), the root feeds a classifier. Decisions:
// "node[a,b)" for every internal node spanning leaves a..b-1.
struct TreeLstmSpec : DynamicSpec {
  int min_leaves = 5;
  int max_leaves = 30;
  double shape_noise = 0.2;
  int batch = 64;
  int hidden = 512;
  int vocab = 30000;
  int classes = 5;
};

// Mixture of experts: `layers` blocks, each a router over `experts` FFN experts; per iteration and layer every
// token group is sent to `top_k` distinct experts drawn by a seeded router (uniform), and only the chosen experts'
// ops appear (up and down projection per group and expert), then a combine op. Decisions: "l<l>.g<g>.e<e>".
struct MoeSpec : DynamicSpec {
  int layers = 4;
  int experts = 8;
  int top_k = 1;
  int groups = 8;        // token groups (the batch)
  int group_tokens = 64; // tokens per group
  int hidden = 512;
  int ffn = 2048;
  int classes = 1000;
};

// var-BERT: the transformer generator's encoder stack (embedding, layers, LM head) with the sequence length drawn
// uniformly from [min_seq, max_seq] per iteration. Decisions: "pos<t>" for every position present.
struct VarBertSpec : DynamicSpec {
  int min_seq = 32;
  int max_seq = 512;
  int layers = 12;
  int hidden = 768;
  int heads = 12;
  int batch = 32;
  int vocab = 30522;
};

// Tree-CNN (the paper's Fig. 1): per iteration a leaf count drawn uniformly from [min_leaves, max_leaves]; every
// pair of neighbouring nodes gets a seeded score (drawn when the pair forms) and the best-scoring pair is merged,
// bottom-up, until one root is left. Every internal node has a grammar type g < types drawn by the seed, and each
// type has its own CNN (kernel 2g + 1, inner channels channels * (g + 1) / 2): concat of the children, conv, relu,
// 1x1 conv back to `channels`. So which weights an iteration reads depends on its tree. The sentence is embedded
// once (a row of channels x width per token), every leaf selects its row, the root feeds a classifier.
// Decisions: "node[a,b):g<g>" for every internal node spanning leaves a..b-1.
struct TreeCnnSpec : DynamicSpec {
  int min_leaves = 5;
  int max_leaves = 30;
  int types = 4;
  int batch = 32;
  int channels = 64;
  int width = 16;
  int vocab = 30000;
  int classes = 200;
};

// Unrolled GAN (Metz et al.): MLP generator and discriminator (`layers` hidden layers of `hidden`); per iteration an
// unroll count k drawn uniformly from [min_unroll, max_unroll]; the discriminator is unrolled k SGD steps inside the
// graph (forward on [real; fake], its own gradient, a parameter step), the generator's loss is the last unrolled
// discriminator on the fake batch and is differentiated through all k steps; then the Adam updates.
// Decisions: "unroll<j>" for every step taken.
struct UnrolledGanSpec : DynamicSpec {
  int min_unroll = 1;
  int max_unroll = 10;
  int layers = 2;
  int hidden = 512;
  int noise = 256;
  int batch = 512;
};

// AlphaFold-like recycling: per iteration a crop length drawn uniformly from {min_crop, min_crop + crop_step, ...
// <= max_crop} and a recycle count r from [min_recycles, max_recycles]; every recycle runs `blocks` evoformer-style
// blocks (MSA row attention + transition as a transformer layer over the `msa` rows, an outer product mean into
// the pair representation, triangle attention + transition as a transformer layer over the pair rows), weights
// shared by all recycles; as in AlphaFold only the last recycle is differentiated (the earlier ones' outputs are
// embedded into the next with their gradient stopped). A distogram head on the pair representation.
// Decisions: "recycle<j>" for j < r and "crop<c>" for every crop length of the grid up to the drawn one.
struct RecycleSpec : DynamicSpec {
  int min_recycles = 1;
  int max_recycles = 4;
  int min_crop = 64;
  int max_crop = 256;
  int crop_step = 64;
  int blocks = 4;
  int msa = 16;
  int msa_hidden = 64;
  int pair_hidden = 32;
  int heads = 4;
  int batch = 1;
  int bins = 64;
};

Trace generate_var_lstm(const VarLstmSpec& spec, const Roofline& roofline);
Trace generate_tree_lstm(const TreeLstmSpec& spec, const Roofline& roofline);
Trace generate_moe(const MoeSpec& spec, const Roofline& roofline);
Trace generate_var_bert(const VarBertSpec& spec, const Roofline& roofline);
Trace generate_tree_cnn(const TreeCnnSpec& spec, const Roofline& roofline);
Trace generate_unrolled_gan(const UnrolledGanSpec& spec, const Roofline& roofline);
Trace generate_recycle(const RecycleSpec& spec, const Roofline& roofline);

} // namespace memsim
