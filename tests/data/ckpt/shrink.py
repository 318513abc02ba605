#!/usr/bin/env python3
"""shrink.py — run once (python3 tests/data/ckpt/shrink.py) to write small
variants of the bundled configs (tests/data/configs/*/config.json) into
tests/data/ckpt/<name>/config.json: same architecture and structure, tiny
dims chosen so tp=3 / dp_shard=3 give uneven shards (intermediate 100,
vocab 101). The checkpoint tests generate deterministic weights for them
with tpx-ckpt-test gen. Not needed by the build or the tests."""
import json
import os

here = os.path.dirname(os.path.abspath(__file__))
src = os.path.join(here, "..", "configs")
SMALL = {
    "hidden_size": 48, "intermediate_size": 100, "moe_intermediate_size": 20,
    "num_hidden_layers": 2, "vocab_size": 101, "head_dim": 8,
    "num_local_experts": 4, "num_experts": 4, "num_experts_per_tok": 2,
    "mamba_d_head": 8, "mamba_n_heads": 12, "mamba_d_state": 8,
    "mamba_chunk_size": 8, "max_window_layers": 2, "sliding_window_pattern": 2,
    "query_pre_attn_scalar": 8,
}
for name in sorted(os.listdir(src)):
    path = os.path.join(src, name, "config.json")
    if not os.path.isfile(path):
        continue
    c = json.load(open(path))
    heads = c.get("num_attention_heads", 6)
    kv = c.get("num_key_value_heads", heads)
    for k, v in SMALL.items():
        if k in c:
            c[k] = v
    c["num_attention_heads"] = 6
    if "num_key_value_heads" in c:
        c["num_key_value_heads"] = 6 if kv == heads else 3
    if "head_dim" not in c:
        c["hidden_size"] = 48  # head_dim 8 from 48 / 6
    if "mlp_only_layers" in c:
        c["mlp_only_layers"] = []
    out = os.path.join(here, name)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
        f.write("\n")
