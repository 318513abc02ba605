# gen_olmo2.py CONFIG DIR — a header-true, zero-filled (sparse) OLMo-2
# model.safetensors for CONFIG in DIR: every tensor Olmo2ForCausalLM has,
# bf16, data never written (cli_truth.sh).
import json, os, struct, sys
c = json.load(open(sys.argv[1]))
H, I, V, L = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["num_hidden_layers"]
D = H // c["num_attention_heads"]
K = c["num_key_value_heads"] * D
t = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H], "lm_head.weight": [V, H]}
for l in range(L):
    p = "model.layers.%d." % l
    t.update({p + "self_attn.q_proj.weight": [H, H], p + "self_attn.k_proj.weight": [K, H],
              p + "self_attn.v_proj.weight": [K, H], p + "self_attn.o_proj.weight": [H, H],
              p + "self_attn.q_norm.weight": [H], p + "self_attn.k_norm.weight": [K],
              p + "mlp.gate_proj.weight": [I, H], p + "mlp.up_proj.weight": [I, H],
              p + "mlp.down_proj.weight": [H, I],
              p + "post_attention_layernorm.weight": [H], p + "post_feedforward_layernorm.weight": [H]})
off, h = 0, {}
for n, shp in t.items():
    sz = 2
    for s in shp: sz *= s
    h[n] = {"dtype": "BF16", "shape": shp, "data_offsets": [off, off + sz]}
    off += sz
b = json.dumps(h).encode()
with open(os.path.join(sys.argv[2], "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(b)) + b)
    f.truncate(8 + len(b) + off)
