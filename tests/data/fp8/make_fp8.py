#!/usr/bin/env python3
"""make_fp8.py OUTDIR [VARIANT] — write a tiny FP8 block-quantized
checkpoint the way DeepSeek-V3 / Qwen3-*-FP8 publish them (python3 stdlib
only; the tests run it, nothing is committed but this script).

A Qwen3 dense model (hidden 256, 4 heads of 64, 2 KV heads, intermediate
384, vocab 512, 2 layers, bf16): every Linear weight of a decoder layer is
stored F8_E4M3 with a companion `<name>_scale_inv` [ceil(out/128),
ceil(in/128)] F32 (128 x 128 blocks), config.json carries
`quantization_config` {quant_method: fp8, fmt: e4m3, weight_block_size:
[128, 128], activation_scheme: dynamic}; embeddings, norms and lm_head stay
BF16. Values are deterministic bytes (no F8 NaN patterns).

VARIANT (default ok) breaks one thing for the refusal tests:
  ok            as above
  e8m0          scales stored F8_E8M0 (UE8M0, as DeepSeek-V3.2 publishes)
  static        one F32 scale per tensor ([]) and an `.activation_scale`
                beside each weight (Mistral-4's static scheme)
  scale-shape   layer 0 q_proj's scale one column too wide [2, 3]
  orphan        an extra `model.layers.0.mlp.extra_proj.weight_scale_inv`
                whose weight is not stored
  no-scale      layer 1 down_proj stored F8 without its scale
  no-qconfig    config.json without quantization_config

make_fp8.py list FAMILY_DIR OUTDIR [block|tensor] — for a family recorded
from NeMo Automodel (tests/data/upstream_moe/<family>/{config.json,
hf_names.json}): OUTDIR/config.json with quantization_config added,
OUTDIR/list-bf16 (the Hugging Face tensors as recorded) and OUTDIR/list-fp8
(the weights Automodel's adapters quantize stored F8_E4M3 with their
scales) for `tpx-ckpt-test gen-list`. block: DeepSeek-V3's 128 x 128 F32
scales; tensor: Mistral-4's, one F32 scale per tensor ([E, 1, 1] per
expert of a fused expert tensor) and activation scales.
"""
import json
import os
import struct
import sys

H, HEADS, KV, HD, I, V, L = 256, 4, 2, 64, 384, 512, 2
BLOCK = 128


def cdiv(a, b):
    return (a + b - 1) // b


def tensors(variant):
    t = [("model.embed_tokens.weight", "BF16", [V, H]),
         ("model.norm.weight", "BF16", [H]),
         ("lm_head.weight", "BF16", [V, H])]
    for l in range(L):
        p = "model.layers.%d" % l
        t += [(p + ".input_layernorm.weight", "BF16", [H]),
              (p + ".post_attention_layernorm.weight", "BF16", [H]),
              (p + ".self_attn.q_norm.weight", "BF16", [HD]),
              (p + ".self_attn.k_norm.weight", "BF16", [HD])]
        lin = [("self_attn.q_proj", [HEADS * HD, H]),
               ("self_attn.k_proj", [KV * HD, H]),
               ("self_attn.v_proj", [KV * HD, H]),
               ("self_attn.o_proj", [H, HEADS * HD]),
               ("mlp.gate_proj", [I, H]), ("mlp.up_proj", [I, H]),
               ("mlp.down_proj", [H, I])]
        for name, shape in lin:
            w = "%s.%s.weight" % (p, name)
            t.append((w, "F8_E4M3", shape))
            if variant == "no-scale" and l == 1 and name == "mlp.down_proj":
                continue
            sshape = [cdiv(shape[0], BLOCK), cdiv(shape[1], BLOCK)]
            if variant == "static":  # one scale per tensor, Mistral-4's way
                sshape = []
                t.append(("%s.%s.activation_scale" % (p, name), "F32", []))
            if variant == "scale-shape" and l == 0 and name == "self_attn.q_proj":
                sshape[1] += 1
            sdt = "F8_E8M0" if variant == "e8m0" else "F32"
            t.append((w + "_scale_inv", sdt, sshape))
    if variant == "orphan":
        t.append(("model.layers.0.mlp.extra_proj.weight_scale_inv", "F32",
                  [2, 2]))
    return t


SIZE = {"BF16": 2, "F32": 4, "F8_E4M3": 1, "F8_E8M0": 1}


def data(name, dtype, n):
    seed = sum(name.encode()) & 0xFF
    if dtype == "F8_E4M3":  # bit 7 sign, no 0x7f/0xff (NaN)
        return bytes(((i * 7 + seed) % 0x7E) | ((i & 1) << 7) for i in range(n))
    if dtype == "F8_E8M0":  # 2^(e-127), around 2^-8
        return bytes(119 + (i + seed) % 3 for i in range(n))
    if dtype == "F32":
        return b"".join(struct.pack("<f", 2.0 ** -(8 + (i + seed) % 3))
                        for i in range(n))
    # BF16: small values around 0.01
    return b"".join(struct.pack("<H", 0x3C00 + (i * 13 + seed) % 512)
                    for i in range(n))


# What the adapters' _should_quantize_key leaves in full precision.
KEEP = ["input_layernorm.weight", "post_attention_layernorm.weight",
        "norm.weight", "lm_head.weight", "embed_tokens.weight",
        "mlp.gate.weight"]


def family_lists(fam, out, style):
    os.makedirs(out, exist_ok=True)
    cfg = json.load(open(os.path.join(fam, "config.json")))
    q = {"quant_method": "fp8", "fmt": "e4m3"}
    if style == "block":
        q.update(weight_block_size=[BLOCK, BLOCK], activation_scheme="dynamic")
    else:
        q.update(activation_scheme="static")
    cfg["quantization_config"] = q
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    names = json.load(open(os.path.join(fam, "hf_names.json")))["hf_tensors"]
    bf, fp = [], []
    for name, dtype, shape in names:
        line = " ".join([name, dtype.upper()] + [str(d) for d in shape])
        bf.append(line)
        fused = name.endswith((".gate_up_proj", ".down_proj")) and \
            ".mlp.experts." in name
        quant = fused or (name.endswith(".weight") and len(shape) == 2 and
                          not any(k in name for k in KEEP))
        if not quant:
            fp.append(line)
            continue
        fp.append(" ".join([name, "F8_E4M3"] + [str(d) for d in shape]))
        if style == "block":
            fp.append("%s_scale_inv F32 %s" % (name, " ".join(
                [str(d) for d in shape[:-2]] +
                [str(cdiv(d, BLOCK)) for d in shape[-2:]])))
        elif fused:
            fp.append("%s_scale_inv F32 %d 1 1" % (name, shape[0]))
            fp.append("%s_activation_scale F32 %d" % (name, shape[0]))
        else:
            fp.append("%s_scale_inv F32" % name)
            fp.append("%s.activation_scale F32" % name[:-len(".weight")])
    for n, lines in (("list-bf16", bf), ("list-fp8", fp)):
        with open(os.path.join(out, n), "w") as f:
            f.write("\n".join(lines) + "\n")


def main():
    if sys.argv[1] == "list":
        family_lists(sys.argv[2], sys.argv[3],
                     sys.argv[4] if len(sys.argv) > 4 else "block")
        return
    out = sys.argv[1]
    variant = sys.argv[2] if len(sys.argv) > 2 else "ok"
    os.makedirs(out, exist_ok=True)
    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
           "hidden_size": H, "intermediate_size": I,
           "num_attention_heads": HEADS, "num_key_value_heads": KV,
           "head_dim": HD, "num_hidden_layers": L, "vocab_size": V,
           "rms_norm_eps": 1e-06, "rope_theta": 1000000, "max_position_embeddings": 4096,
           "hidden_act": "silu", "tie_word_embeddings": False,
           "torch_dtype": "bfloat16", "transformers_version": "4.51.0"}
    if variant != "no-qconfig":
        cfg["quantization_config"] = {
            "activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
            "weight_block_size": [BLOCK, BLOCK]}
        if variant == "e8m0":
            cfg["quantization_config"]["scale_fmt"] = "ue8m0"
        if variant == "static":
            cfg["quantization_config"]["activation_scheme"] = "static"
            del cfg["quantization_config"]["weight_block_size"]
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    # the layout tpx's writer gives (metadata first, names in order), so a
    # merged checkpoint compares byte for byte with the whole file
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, dtype, shape in sorted(tensors(variant)):
        n = 1
        for d in shape:
            n *= d
        b = data(name, dtype, n)
        assert len(b) == n * SIZE[dtype]
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


if __name__ == "__main__":
    main()
