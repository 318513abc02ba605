#!/usr/bin/env python3
"""fp8_dequant.py OUTDIR — the goldens of tpx's FP8 dequantizing reader
(docs/CHECKPOINT.md "FP8 checkpoints"), computed once by NeMo Automodel
0.7.0's own dequantization in the upstream venv (tools/upstream/VENV.txt):

  /work/upstream-venv/bin/python tools/upstream/fp8_dequant.py \
      tests/data/fp8/dequant

Writes OUTDIR/model.safetensors + config.json, a tiny FP8 checkpoint:
  blk.weight        F8_E4M3 [130, 136], blk.weight_scale_inv F32 [2, 2]
                    (128 x 128 blocks, partial edge blocks, full-mantissa
                    scales)
  e8.weight         F8_E4M3 [130, 136], e8.weight_scale_inv F8_E8M0 [2, 2]
                    (one block scaled into f32 subnormals)
  pt.weight         F8_E4M3 [20, 24], pt.weight_scale_inv F32 [] (one per
                    tensor)
  ex.gate_up_proj   F8_E4M3 [3, 16, 24], ex.gate_up_proj_scale_inv F32
                    [3, 1, 1] (one per expert, Mistral-4's fused experts)
and OUTDIR/expected.safetensors: each weight dequantized by upstream into
F32, BF16 and F16 (`<name>.F32` ...; e8.weight into BF16 only): DeepSeek-V3's adapter function
(dequantize_from_fp8, its torch path: the one a CPU load takes) for the
block scales, Mistral-4's (_dequantize_state_dict) for the per-tensor and
per-expert ones. The weight bytes are a fixed pattern with no F8 NaN.
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file

from nemo_automodel.components.models.deepseek_v3.state_dict_adapter import (
    dequantize_from_fp8,
)
from nemo_automodel.components.models.mistral4.state_dict_adapter import (
    _dequantize_state_dict,
)


def f8_pattern(shape, seed):
    n = 1
    for s in shape:
        n *= s
    b = [(i * 37 + seed * 101 + (i // 7) * 13) % 256 for i in range(n)]
    b = [0x7E if x in (0x7F, 0xFF) else x for x in b]  # no NaN
    return torch.tensor(b, dtype=torch.uint8).view(torch.float8_e4m3fn).reshape(shape)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    src = {
        "blk.weight": f8_pattern([130, 136], 1),
        "blk.weight_scale_inv": torch.tensor(
            [[0.0013717, 0.31234567], [1.7e-5, 3.0e4 / 448.0]], dtype=torch.float32),
        "e8.weight": f8_pattern([130, 136], 2),
        # 2^(e-127): 2^-126 (into f32 subnormals), 2^-7, 1, 2^7
        "e8.weight_scale_inv": torch.tensor([[1, 120], [127, 134]], dtype=torch.uint8)
        .view(torch.float8_e8m0fnu),
        "pt.weight": f8_pattern([20, 24], 3),
        "pt.weight_scale_inv": torch.tensor(0.0071234, dtype=torch.float32),
        "ex.gate_up_proj": f8_pattern([3, 16, 24], 4),
        "ex.gate_up_proj_scale_inv": torch.tensor(
            [0.00011, 0.0392157, 2.5], dtype=torch.float32).reshape(3, 1, 1),
    }
    save_file(src, os.path.join(out, "model.safetensors"))
    cfg = {
        "architectures": ["TpxTestForCausalLM"],
        "torch_dtype": "bfloat16",
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                                "weight_block_size": [128, 128]},
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    dtypes = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
    exp = {}
    for dn, dt in dtypes.items():
        for w in ("blk.weight", "e8.weight"):
            if w == "e8.weight" and dn != "BF16":
                continue  # powers of two: BF16 is the one rounding
            exp[w + "." + dn] = dequantize_from_fp8(
                src[w], src[w + "_scale_inv"], dtype=dt, name=w).contiguous()
        sd = {k: src[k].clone() for k in ("pt.weight", "pt.weight_scale_inv",
                                          "ex.gate_up_proj",
                                          "ex.gate_up_proj_scale_inv")}
        sd = _dequantize_state_dict(sd, dt)
        for w in ("pt.weight", "ex.gate_up_proj"):
            exp[w + "." + dn] = sd[w].contiguous()
    save_file(exp, os.path.join(out, "expected.safetensors"))


if __name__ == "__main__":
    main()
