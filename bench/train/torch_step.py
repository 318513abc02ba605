#!/usr/bin/env python3
"""torch_step.py - the torch side of bench/train: the same checkpoint, token
batch and optimizer as tpx-train, eager f32 attention on CPU, world 1.
Prints one line: RESULT step_s=<mean of steps after the first> tokens_s=...
usage: torch_step.py MODEL_DIR TOKENS B T STEPS THREADS"""
import sys
import time

import numpy as np
import torch
import transformers


def main():
    model_dir, tokens, b, t, steps, threads = sys.argv[1:7]
    b, t, steps, threads = int(b), int(t), int(steps), int(threads)
    torch.set_num_threads(threads)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, attn_implementation="eager", dtype=torch.float32)
    data = np.fromfile(tokens, dtype="<i4").reshape(b, t + 1).astype(np.int64)
    inp, tgt = torch.from_numpy(data[:, :t]), torch.from_numpy(data[:, 1:])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    times = []
    for step in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        logits = model(input_ids=inp).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 tgt.reshape(-1))
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
        print(f"torch step {step} loss {loss.item():.6f} grad_norm {gn.item():.6f} "
              f"time {times[-1]:.3f} s", flush=True)
    steady = times[1:] if len(times) > 1 else times
    s = sum(steady) / len(steady)
    print(f"RESULT step_s={s:.4f} tokens_s={b * t / s:.1f}")


if __name__ == "__main__":
    main()
