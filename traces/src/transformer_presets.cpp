// Transformer presets as analytic traces: the IWSLT Transformer-base encoder-decoder (post-LN, Vaswani et al.),
// BERT pre-training (post-LN, Hugging Face BertForPreTraining) and GPT-2 (pre-LN, Hugging Face GPT2LMHeadModel).
// Every projection carries its bias, every LayerNorm its scale and shift. One chain layer per block, plus the
// embedding layer first and the head last; the encoder-decoder is not a chain (the decoder reads the encoder).
#include "memsim/traces/model_presets.hpp"

#include "trace_builder.hpp"

#include <fmt/format.h>

namespace memsim {

namespace {

const SplitDims kTokenSplit{"batch", "sequence"};
const SplitDims kAttentionSplit{"batch", "sequence", "heads"};

// Activations batch x tokens x features.
struct Seq {
  TensorId id = 0;
  std::int64_t s = 0, d = 0;
};

class TransformerBuilder {
public:
  TransformerBuilder(TraceBuilder& builder, std::int64_t batch, std::int64_t heads)
      : b_(builder), batch_(batch), heads_(heads)
  {
  }

  int layer = 0;

  std::string prefix() const { return fmt::format("l{}", layer); }

  Seq linear(const std::string& name, const Seq& x, std::int64_t out)
  {
    TensorId w = b_.weight(name + ".w", {out, x.d}, layer);
    TensorId bias = b_.weight(name + ".b", {out}, layer);
    return {b_.forward(name, "matmul", layer, {x.id, w, bias}, {batch_, x.s, out}, 2 * rows(x) * double(x.d * out),
                       kTokenSplit),
            x.s, out};
  }
  Seq layernorm(const std::string& name, const Seq& x)
  {
    TensorId w = b_.weight(name + ".w", {2, x.d}, layer);
    return like(x, b_.forward(name, "layernorm", layer, {x.id, w}, shape(x), 8 * elements(x), kTokenSplit));
  }
  Seq pointwise(const std::string& name, const std::string& type, const Seq& x)
  {
    return like(x, b_.forward(name, type, layer, {x.id}, shape(x), 8 * elements(x), kTokenSplit));
  }
  Seq add(const std::string& name, const Seq& x, const Seq& y)
  {
    return like(x, b_.forward(name, "add", layer, {x.id, y.id}, shape(x), elements(x), kTokenSplit));
  }
  // Multi-head attention of `query`'s tokens over `memory`'s (self-attention when they are the same).
  Seq attention(const std::string& name, const Seq& query, const Seq& memory)
  {
    const std::int64_t d = query.d;
    Seq q = linear(name + ".q", query, d);
    Seq k = linear(name + ".k", memory, d);
    Seq v = linear(name + ".v", memory, d);
    const double pairs = static_cast<double>(batch_ * query.s * memory.s);
    const Shape scores_shape{batch_, heads_, query.s, memory.s};
    TensorId scores =
        b_.forward(name + ".scores", "bmm", layer, {q.id, k.id}, scores_shape, 2 * pairs * double(d), kAttentionSplit);
    TensorId probs = b_.forward(name + ".softmax", "softmax", layer, {scores}, scores_shape, 5 * pairs * double(heads_),
                                kAttentionSplit);
    TensorId context = b_.forward(name + ".context", "bmm", layer, {probs, v.id}, {batch_, query.s, d},
                                  2 * pairs * double(d), kAttentionSplit);
    return linear(name + ".o", Seq{context, query.s, d}, d);
  }
  Seq feed_forward(const std::string& name, const Seq& x, std::int64_t ffn, const std::string& activation)
  {
    return linear(name + ".fc2", pointwise(name + "." + activation, activation, linear(name + ".fc1", x, ffn)), x.d);
  }
  // Looks up `tables` (vocab or positions x d) for `tokens` and sums them.
  Seq embed(const std::string& name, TensorId tokens, std::int64_t s, const std::vector<TensorId>& tables,
            std::int64_t d)
  {
    std::vector<TensorId> inputs{tokens};
    inputs.insert(inputs.end(), tables.begin(), tables.end());
    const Seq out{0, s, d};
    return like(out, b_.forward(name, "embedding", layer, inputs, shape(out),
                                elements(out) * static_cast<double>(tables.size()), kTokenSplit));
  }
  // The projection onto the vocabulary through a tied embedding table (vocab x d), with an optional bias.
  Seq tied_head(const std::string& name, const Seq& x, TensorId table, std::int64_t vocab, bool bias)
  {
    std::vector<TensorId> inputs{x.id, table};
    if (bias)
      inputs.push_back(b_.weight(name + ".b", {vocab}, layer));
    return {b_.forward(name, "matmul", layer, inputs, {batch_, x.s, vocab}, 2 * rows(x) * double(x.d * vocab),
                       kTokenSplit),
            x.s, vocab};
  }
  // The first token of every sequence (BERT's pooler input).
  Seq first_token(const std::string& name, const Seq& x)
  {
    const Seq out{0, 1, x.d};
    return like(out, b_.forward(name, "select", layer, {x.id}, shape(out), elements(out), {"batch"}));
  }
  TensorId tokens(const std::string& name, std::int64_t s) { return b_.input(name, {batch_, s}, 8); }
  TensorId table(const std::string& name, std::int64_t rows, std::int64_t d)
  {
    return b_.weight(name, {rows, d}, layer);
  }
  void loss(const std::vector<Seq>& predictions, std::int64_t s)
  {
    std::vector<TensorId> ids;
    for (const Seq& prediction : predictions)
      ids.push_back(prediction.id);
    b_.loss(ids, tokens("labels", s), layer, kTokenSplit);
  }

private:
  Shape shape(const Seq& x) const { return {batch_, x.s, x.d}; }
  double rows(const Seq& x) const { return static_cast<double>(batch_ * x.s); }
  double elements(const Seq& x) const { return rows(x) * static_cast<double>(x.d); }
  static Seq like(Seq shape, TensorId id)
  {
    shape.id = id;
    return shape;
  }

  TraceBuilder& b_;
  std::int64_t batch_;
  std::int64_t heads_;
};

// The preset's sizes under the spec's knobs: d keeps the head count (the head size scales).
struct Dimensions {
  std::int64_t batch = 0, seq = 0, d = 0, ffn = 0;
  std::vector<std::int64_t> layers;
};

Dimensions dimensions(const PresetSpec& spec, const ModelPreset& preset)
{
  Dimensions dims;
  dims.batch = spec.batch > 0 ? spec.batch : preset.batch;
  dims.seq = spec.seq > 0 ? spec.seq : preset.seq;
  dims.d = preset.heads * scaled(preset.hidden / preset.heads, spec.width);
  dims.ffn = scaled(preset.ffn, spec.width);
  for (int layers : preset.blocks)
    dims.layers.push_back(scaled(layers, spec.depth));
  return dims;
}

TraceBuilder builder_for(const PresetSpec& spec, const ModelPreset& preset, const Dimensions& dims,
                         const Roofline& roofline)
{
  std::string knobs;
  if (spec.width != 1.0)
    knobs += fmt::format("-w{}", spec.width);
  if (spec.depth != 1.0)
    knobs += fmt::format("-d{}", spec.depth);
  return TraceBuilder(fmt::format("{}{}-s{}-b{}", preset.name, knobs, dims.seq, dims.batch), spec.dtype,
                      static_cast<int>(dims.batch), roofline);
}

} // namespace

Trace generate_bert(const PresetSpec& spec, const ModelPreset& preset, const Roofline& roofline)
{
  const Dimensions dims = dimensions(spec, preset);
  TraceBuilder builder = builder_for(spec, preset, dims, roofline);
  TransformerBuilder net(builder, dims.batch, preset.heads);
  const std::int64_t s = dims.seq, d = dims.d;
  TensorId words = net.table("embeddings.word.w", preset.vocab, d);
  TensorId positions = net.table("embeddings.position.w", std::max<std::int64_t>(preset.positions, s), d);
  TensorId types = net.table("embeddings.type.w", 2, d);
  Seq x = net.embed("l0.embeddings", net.tokens("tokens", s), s, {words, positions, types}, d);
  x = net.layernorm("l0.embeddings.ln", x);
  for (++net.layer; net.layer <= dims.layers[0]; ++net.layer) {
    const std::string p = net.prefix();
    x = net.layernorm(p + ".ln1", net.add(p + ".add1", x, net.attention(p + ".attn", x, x)));
    x = net.layernorm(p + ".ln2", net.add(p + ".add2", x, net.feed_forward(p + ".ffn", x, dims.ffn, "gelu")));
  }
  const std::string p = net.prefix();
  // Next-sentence prediction on the pooled first token; masked-LM over every token through the tied word table.
  Seq pooled = net.pointwise(p + ".pooler.tanh", "tanh", net.linear(p + ".pooler", net.first_token(p + ".cls", x), d));
  Seq nsp = net.linear(p + ".nsp", pooled, 2);
  Seq transform =
      net.layernorm(p + ".mlm.ln", net.pointwise(p + ".mlm.gelu", "gelu", net.linear(p + ".mlm.dense", x, d)));
  Seq mlm = net.tied_head(p + ".mlm.decoder", transform, words, preset.vocab, true);
  net.loss({mlm, nsp}, s);
  builder.backward_and_update();
  return builder.finish();
}

Trace generate_gpt2(const PresetSpec& spec, const ModelPreset& preset, const Roofline& roofline)
{
  const Dimensions dims = dimensions(spec, preset);
  TraceBuilder builder = builder_for(spec, preset, dims, roofline);
  TransformerBuilder net(builder, dims.batch, preset.heads);
  const std::int64_t s = dims.seq, d = dims.d;
  TensorId words = net.table("wte.w", preset.vocab, d);
  TensorId positions = net.table("wpe.w", std::max<std::int64_t>(preset.positions, s), d);
  Seq x = net.embed("l0.embeddings", net.tokens("tokens", s), s, {words, positions}, d);
  for (++net.layer; net.layer <= dims.layers[0]; ++net.layer) {
    const std::string p = net.prefix();
    Seq h = net.layernorm(p + ".ln1", x);
    x = net.add(p + ".add1", x, net.attention(p + ".attn", h, h));
    x = net.add(p + ".add2", x, net.feed_forward(p + ".mlp", net.layernorm(p + ".ln2", x), dims.ffn, "gelu"));
  }
  const std::string p = net.prefix();
  // The LM head is the token table (tied, no bias).
  net.loss({net.tied_head(p + ".lm_head", net.layernorm(p + ".ln_f", x), words, preset.vocab, false)}, s);
  builder.backward_and_update();
  return builder.finish();
}

Trace generate_encoder_decoder(const PresetSpec& spec, const ModelPreset& preset, const Roofline& roofline)
{
  Dimensions dims = dimensions(spec, preset);
  const std::int64_t source = dims.seq, target = std::max<std::int64_t>(1, dims.seq - 1); // IWSLT: 100 and 99
  TraceBuilder builder = builder_for(spec, preset, dims, roofline);
  TransformerBuilder net(builder, dims.batch, preset.heads);
  const std::int64_t d = dims.d;
  // One table for source, target and output (a joint vocabulary); positions are sinusoidal (no weights).
  TensorId table = net.table("embedding.w", preset.vocab, d);
  Seq x = net.embed("l0.source_embedding", net.tokens("source_tokens", source), source, {table}, d);
  for (++net.layer; net.layer <= dims.layers[0]; ++net.layer) {
    const std::string p = net.prefix();
    x = net.layernorm(p + ".ln1", net.add(p + ".add1", x, net.attention(p + ".attn", x, x)));
    x = net.layernorm(p + ".ln2", net.add(p + ".add2", x, net.feed_forward(p + ".ffn", x, dims.ffn, "relu")));
  }
  const Seq memory = x;
  Seq y = net.embed(net.prefix() + ".target_embedding", net.tokens("target_tokens", target), target, {table}, d);
  const int last = net.layer + static_cast<int>(dims.layers[1]);
  for (++net.layer; net.layer <= last; ++net.layer) {
    const std::string p = net.prefix();
    y = net.layernorm(p + ".ln1", net.add(p + ".add1", y, net.attention(p + ".self", y, y)));
    y = net.layernorm(p + ".ln2", net.add(p + ".add2", y, net.attention(p + ".cross", y, memory)));
    y = net.layernorm(p + ".ln3", net.add(p + ".add3", y, net.feed_forward(p + ".ffn", y, dims.ffn, "relu")));
  }
  net.loss({net.tied_head(net.prefix() + ".output", y, table, preset.vocab, false)}, target);
  builder.backward_and_update();
  return builder.finish();
}

} // namespace memsim
