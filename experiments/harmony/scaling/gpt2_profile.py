"""A GPT-2 "billions" layer profile with a chosen number of blocks, from the authors' gpt2_10b profile.

Usage: gpt2_profile.py GPT2_10B_JSON N_LAYER MODEL_NAME OUT_JSON

Harmony profiles its 10-100B GPT-2s from one 1-layer model (the repo's gpt2_b_1layer): in gpt2_10b.json every
GPT2Layer entry is the same measurement. The 20B..100B models differ only in n_layer (50, 100, ..., 500 at d 4096),
so their profiles are the embedding (layer 0), n_layer copies of the block entry (layer 1), then the final
LayerNorm, the LM head and the loss, unchanged: R = n_layer + 4, as the committed schedules' CONFIGS["R"].
"""
import json
import sys


def main():
    source_path, n_layer, model, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    source = json.load(open(source_path))
    layers = source["layers"]
    block = 1
    tail = list(range(len(layers) - 3, len(layers)))  # LayerNorm, LM head, loss
    blocks = [i for i in range(1, len(layers) - 3)]
    if any(layers[i]["name"].split(": ", 1)[1] != "GPT2Layer" for i in blocks):
        sys.exit("error: expected embedding, GPT2Layer blocks, LayerNorm, LM head, loss")
    order = [0] + [block] * n_layer + tail
    out_layers = []
    for index, origin in enumerate(order):
        layer = json.loads(json.dumps(layers[origin]))
        layer["index"] = index
        layer["name"] = f"vLayer{index}: " + layer["name"].split(": ", 1)[1]
        if index > 0:
            for tensor in layer["input_tensors"]:
                tensor[0] = f"out{index - 1}"
        out_layers.append(layer)
    microbatch = {}
    for u, entry in source["microbatch"].items():
        microbatch[u] = {key: ([value[i] for i in order] if isinstance(value, list) else value)
                         for key, value in entry.items()}
    profile = dict(source)
    profile.update({
        "model": model,
        "num_layers": len(order),
        "notes": source.get("notes", []) + [
            f"synthesized by experiments/harmony/scaling/gpt2_profile.py: gpt2_10b's layers with {n_layer} "
            "copies of its GPT2Layer entry (Harmony's own 1-layer profile of the billion-parameter GPT-2s)"],
        "layers": out_layers,
        "microbatch": microbatch,
    })
    with open(out_path, "w") as out:
        json.dump(profile, out, separators=(",", ":"))
        out.write("\n")


if __name__ == "__main__":
    main()
