#!/usr/bin/env python3
"""Writes huge-hidden.config.json and huge-hidden.safetensors (run once; the
outputs are committed): a Llama config whose hidden_size is 2^62 (the
plugin refuses the skeleton, so the model comes from the tiny safetensors
headers) for the activation estimate's int64 saturation (cli_memory.sh)."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
       "hidden_size": 1 << 62, "intermediate_size": 8,
       "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 2,
       "num_hidden_layers": 1, "vocab_size": 8, "torch_dtype": "bfloat16",
       "tie_word_embeddings": False}
with open(os.path.join(HERE, "huge-hidden.config.json"), "w") as f:
    json.dump(cfg, f, indent=1)
    f.write("\n")
t = [("model.embed_tokens.weight", [8, 4]), ("lm_head.weight", [8, 4]),
     ("model.norm.weight", [4])]
for n, s in (("self_attn.q_proj", [4, 4]), ("self_attn.k_proj", [2, 4]),
             ("self_attn.v_proj", [2, 4]), ("self_attn.o_proj", [4, 4]),
             ("mlp.gate_proj", [8, 4]), ("mlp.up_proj", [8, 4]),
             ("mlp.down_proj", [4, 8]), ("input_layernorm", [4]),
             ("post_attention_layernorm", [4])):
    t.append(("model.layers.0.%s.weight" % n, s))
off, h = 0, {}
for n, s in t:
    nb = 2
    for d in s:
        nb *= d
    h[n] = {"dtype": "BF16", "shape": s, "data_offsets": [off, off + nb]}
    off += nb
b = json.dumps(h, separators=(",", ":")).encode()
with open(os.path.join(HERE, "huge-hidden.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(b)) + b + b"\0" * off)
