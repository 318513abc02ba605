#!/usr/bin/env python3
"""get_slice.py — the Python baseline of bench/ckpt: read every rank's boxes
(dumped by tpx-bench-ckpt --dump-slices) with safetensors'
safe_open(...).get_slice, framework "pt", one rank after the other.
Usage: get_slice.py WEIGHTS_DIR SLICES_JSON. Prints the time (best of 3)."""
import json
import os
import sys
import time

import torch
from safetensors import safe_open

weights, slices = sys.argv[1], sys.argv[2]
index = os.path.join(weights, "model.safetensors.index.json")
if os.path.exists(index):
    wm = json.load(open(index))["weight_map"]
else:
    wm = None
ranks = json.load(open(slices))["ranks"]
files = {}
for name in ranks[0]:
    f = os.path.join(weights, wm[name] if wm else "model.safetensors")
    files.setdefault(f, None)
handles = {f: safe_open(f, framework="pt") for f in files}
where = {name: os.path.join(weights, wm[name] if wm else "model.safetensors")
         for name in ranks[0]}
best = None
for rep in range(3):
    t0 = time.perf_counter()
    total = 0
    for boxes in ranks:
        for name, box in boxes.items():
            sl = handles[where[name]].get_slice(name)
            t = sl[tuple(slice(a, b) for a, b in box)]
            # get_slice may hand back a view of the mapped file: copy into
            # memory of our own, as tpx does into the caller's buffer
            out = torch.empty(t.shape, dtype=t.dtype)
            out.copy_(t)
            total += out.numel() * out.element_size()
    dt = time.perf_counter() - t0
    best = dt if best is None else min(best, dt)
print("python get_slice: %d bytes in %.3f s = %.0f MB/s" %
      (total, best, total / best / 1e6))
