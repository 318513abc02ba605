"""Run once (not by the build or the tests): instantiate each Diffusers
transformer from the fixture config on the meta device and write
  <name>.params.txt  every parameter "fqn dim0xdim1..." of the config with
                     num_layers = 2 (the structure, small enough to commit)
  totals.txt         "<name> <parameter total of the full-size config>"
Needs torch and diffusers (0.42.1 was used)."""
import json, sys
import torch
import diffusers

MODELS = [
    ("Wan2.1-T2V-1.3B", "WanTransformer3DModel"),
    ("HunyuanVideo-1.5-480p_t2v", "HunyuanVideo15Transformer3DModel"),
    ("LTX-2", "LTX2VideoTransformer3DModel"),
    ("Qwen-Image", "QwenImageTransformer2DModel"),
]

def build(cls, cfg):
    with torch.device("meta"):
        return cls.from_config(cfg)

# Option coverage: small variants (2 layers) written as fixture configs too.
VARIANTS = [
    ("variant-wan-i2v", "Wan2.1-T2V-1.3B", "WanTransformer3DModel",
     {"image_dim": 1280, "added_kv_proj_dim": 1536, "pos_embed_seq_len": 514,
      "in_channels": 36, "cross_attn_norm": False}),
    ("variant-hunyuan-meanflow", "HunyuanVideo-1.5-480p_t2v",
     "HunyuanVideo15Transformer3DModel",
     {"use_meanflow": True, "qk_norm": "layer_norm", "mlp_ratio": 3.0,
      "num_refiner_layers": 1, "patch_size": 2}),
    ("variant-ltx23", "LTX-2", "LTX2VideoTransformer3DModel",
     {"gated_attn": True, "audio_gated_attn": True, "cross_attn_mod": True,
      "audio_cross_attn_mod": True, "use_prompt_embeddings": False,
      "norm_elementwise_affine": True, "ff_bias": False,
      "use_keyframes_abs_pos_embedding": True, "attention_out_bias": False}),
    ("variant-qwenimage-t-cond", "Qwen-Image", "QwenImageTransformer2DModel",
     {"use_additional_t_cond": True, "out_channels": None}),
]

totals = []
for name, clsname in MODELS:
    cfg = json.load(open(name + ".config.json"))
    cls = getattr(diffusers, clsname)
    full = build(cls, cfg)
    totals.append("%s %d" % (name, sum(p.numel() for p in full.parameters())))
    del full
    small = dict(cfg, num_layers=2)
    m = build(cls, small)
    with open(name + ".params.txt", "w") as f:
        for fqn, p in m.named_parameters():
            f.write("%s %s\n" % (fqn, "x".join(str(d) for d in p.shape)))
for name, base, clsname, over in VARIANTS:
    cfg = dict(json.load(open(base + ".config.json")), num_layers=2, **over)
    json.dump(cfg, open(name + ".config.json", "w"), indent=2)
    m = build(getattr(diffusers, clsname), cfg)
    with open(name + ".params.txt", "w") as f:
        for fqn, p in m.named_parameters():
            f.write("%s %s\n" % (fqn, "x".join(str(d) for d in p.shape)))
with open("totals.txt", "w") as f:
    f.write("# diffusers %s, meta device, full-size fixture configs\n"
            % diffusers.__version__)
    f.write("\n".join(totals) + "\n")
