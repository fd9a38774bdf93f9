#pragma once
// The dynamic-network shapes the generator, engine, policy and pilot tests share, so that a test says only what it
// varies (iterations, lengths, batch) and every test of one shape builds the same graph.
#include "memsim/traces/dynamic_generators.hpp"

namespace memsim::test {

// A var-lstm small enough to simulate quickly but with real per-op costs: hidden 32, embedding 16, 64 words, 4
// classes. A large batch makes activations, not weights, dominate the peak (DTR and offloading have work to do).
inline VarLstmSpec small_var_lstm(int iterations, int min_len, int max_len, int batch)
{
  VarLstmSpec spec;
  spec.iterations = iterations;
  spec.min_len = min_len;
  spec.max_len = max_len;
  spec.batch = batch;
  spec.hidden = 32;
  spec.embed = 16;
  spec.vocab = 64;
  spec.classes = 4;
  return spec;
}

// The smallest var-lstm (hidden 8, embedding 4, 16 words, 3 classes, batch 2), for graphs counted by hand.
inline VarLstmSpec tiny_var_lstm(int min_len, int max_len, int iterations = 3)
{
  VarLstmSpec spec;
  spec.iterations = iterations;
  spec.min_len = min_len;
  spec.max_len = max_len;
  spec.batch = 2;
  spec.hidden = 8;
  spec.embed = 4;
  spec.vocab = 16;
  spec.classes = 3;
  return spec;
}

} // namespace memsim::test
