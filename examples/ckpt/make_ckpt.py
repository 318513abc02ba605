#!/usr/bin/env python3
"""make_ckpt.py — writes the small example checkpoint the README's quick
start plans with: config.json (a 2-layer Llama) and model.safetensors whose
header lists every tensor of that Llama with its real shape and whose data
section is zeros. Standard library only; run once, outputs committed.

Only the header matters to tpx (`--weights` reads headers, never tensor
data); the data section is there so the file is a valid safetensors file.
usage: make_ckpt.py [OUT_DIR]  (default: this directory)"""
import json
import os
import struct
import sys

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "head_dim": 8,
    "vocab_size": 256,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "attention_bias": False,
    "mlp_bias": False,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}


def tensors(c):
    h, i, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    q = c["num_attention_heads"] * c["head_dim"]
    kv = c["num_key_value_heads"] * c["head_dim"]
    yield "model.embed_tokens.weight", [v, h]
    for n in range(c["num_hidden_layers"]):
        p = f"model.layers.{n}."
        yield p + "input_layernorm.weight", [h]
        yield p + "self_attn.q_proj.weight", [q, h]
        yield p + "self_attn.k_proj.weight", [kv, h]
        yield p + "self_attn.v_proj.weight", [kv, h]
        yield p + "self_attn.o_proj.weight", [h, q]
        yield p + "post_attention_layernorm.weight", [h]
        yield p + "mlp.gate_proj.weight", [i, h]
        yield p + "mlp.up_proj.weight", [i, h]
        yield p + "mlp.down_proj.weight", [h, i]
    yield "model.norm.weight", [h]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in tensors(CONFIG):
        n = 2
        for d in shape:
            n *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + n]}
        off += n
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        f.write(bytes(off))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
