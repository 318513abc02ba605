#!/usr/bin/env python3
"""meta_totals.py [DIR...] -- print the parameter total transformers gives
each *.config.json in DIR (default: this directory), the model built on the
meta device, nothing downloaded. Run once by hand to get the totals the
family tests assert (moe, deepseek, qwen's Qwen3.5-MoE, mistral's
MuseGlimmer); the tests never run it. Needs torch and transformers (5.24
was used)."""
import glob
import os
import sys

import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
DIRS = sys.argv[1:] or [HERE]
for path in sorted(p for d in DIRS
                   for p in glob.glob(os.path.join(d, "*.config.json"))):
    cfg = transformers.AutoConfig.from_pretrained(path)
    cls = getattr(transformers, cfg.architectures[0])
    with torch.device("meta"):
        model = cls(cfg)
    # Tied parameters are one tensor: count each storage once.
    seen, total = set(), 0
    for _, p in model.named_parameters(remove_duplicate=True):
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    print(f"{os.path.basename(path)}\t{cfg.architectures[0]}\t{total}\t"
          f"transformers {transformers.__version__}")
sys.exit(0)
