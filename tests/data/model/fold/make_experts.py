#!/usr/bin/env python3
"""Writes experts.safetensors (run once; committed): one MoE layer's
per-expert checkpoint tensors (4 experts, I 4, H 4, bf16, both naming
styles mixed, Mixtral's router name), a seed for fuzz_safetensors, whose
model holds the matching fused experts."""
import json
import os
import struct

t = []
for e in range(4):
    blk, names = (("mlp", ("gate_proj", "up_proj", "down_proj")) if e % 2 == 0
                  else ("block_sparse_moe", ("w1", "w3", "w2")))
    for n in names:
        t.append(("model.layers.0.%s.experts.%d.%s.weight" % (blk, e, n), [4, 4]))
t.append(("model.layers.0.block_sparse_moe.gate.weight", [4, 4]))
off, h = 0, {}
for n, s in t:
    nb = 2 * s[0] * s[1]
    h[n] = {"dtype": "BF16", "shape": s, "data_offsets": [off, off + nb]}
    off += nb
b = json.dumps(h, separators=(",", ":")).encode()
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "experts.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(b)) + b + b"\0" * off)
