#!/usr/bin/env python3
"""torch_step.py - the torch side of bench/train: the same checkpoint, token
batch and optimizer as tpx-train, eager f32 attention on CPU. World 1 is
plain eager; tp x dp_shard > 1 runs one process per rank over gloo with
DTensor TP (the Llama plan tpx selects: colwise q/k/v/gate/up, rowwise
o/down, vocab-parallel embedding, lm_head colwise with loss_parallel) and
FSDP2 (fully_shard per layer, then the root) on a (dp_shard, tp) mesh.
When nemo_automodel imports, every run (world 1 included, on a one-rank
gloo group) is parallelised by NeMo Automodel's own mesh builder and
fsdp2_strategy_parallelize, in f32 (an f32 MixedPrecisionPolicy, as
tpx-train trains); otherwise by the hand-written plan above (world 1 plain
eager). `--which` prints which one a run would use.
Prints RESULT step_s=<mean of the steps after the first> tokens_s=...
usage: torch_step.py MODEL_DIR TOKENS B T STEPS THREADS [TP DP_SHARD]
       torch_step.py --which"""
import os
import sys
import time

import numpy as np
import torch
import transformers


def load(model_dir, attn="eager"):
    return transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, attn_implementation=attn, dtype=torch.float32)


def batch(tokens, b, t):
    data = np.fromfile(tokens, dtype="<i4").reshape(b, t + 1).astype(np.int64)
    return torch.from_numpy(data[:, :t]), torch.from_numpy(data[:, 1:])


def report(times, b, t, rank=0, cpu=None):
    if rank:
        return
    steady = times[1:] if len(times) > 1 else times
    s = sum(steady) / len(steady)
    extra = ""
    if cpu:
        c = cpu[1:] if len(cpu) > 1 else cpu
        extra = f" cpu_s={sum(c) / len(c):.4f}"
    print(f"RESULT step_s={s:.4f} tokens_s={b * t / s:.1f}{extra}", flush=True)


def world1(model_dir, tokens, b, t, steps, threads):
    torch.set_num_threads(threads)
    model = load(model_dir)
    inp, tgt = batch(tokens, b, t)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    times, cpu = [], []
    for step in range(steps):
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad()
        logits = model(input_ids=inp).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 tgt.reshape(-1))
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        print(f"torch step {step} loss {loss.item():.6f} grad_norm {gn.item():.6f} "
              f"time {times[-1]:.3f} s cpu {cpu[-1]:.3f} s", flush=True)
    report(times, b, t, cpu=cpu)


def clip_mixed(params, max_norm):
    """clip_grad_norm_ for a mix of DTensor and plain grads (norms stay plain
    tensors under TP without FSDP, which torch's clip_grad_norm_ refuses)."""
    grads = [p.grad for p in params if p.grad is not None]
    sq = torch.zeros((), dtype=torch.float64)
    for g in grads:
        n = g.norm(2.0)
        if hasattr(n, "full_tensor"):
            n = n.full_tensor()
        sq += n.double() ** 2
    total = sq.sqrt()
    coef = max_norm / (total.item() + 1e-6)
    if coef < 1.0:
        for g in grads:
            g.mul_(coef)
    return total


def automodel_version():
    """The installed NeMo Automodel's version, or None when it does not
    import."""
    try:
        import nemo_automodel
        from nemo_automodel.components.distributed import parallelizer  # noqa: F401
    except Exception:
        return None
    return getattr(nemo_automodel, "__version__", "unknown")


def automodel_parallelize(model, tp, dp, cp=1):
    """NeMo Automodel's own FSDP2 mesh (pp, dp_replicate, dp_shard, cp, tp)
    and its fsdp2_strategy_parallelize, in f32 (FSDP over dp_shard x cp)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy
    from nemo_automodel.components.distributed.mesh import ParallelismSizes
    from nemo_automodel.components.distributed.mesh_utils import _create_fsdp2_device_mesh
    from nemo_automodel.components.distributed import parallelizer
    from torch.distributed.fsdp._fully_shard._fsdp_param import FSDPParam
    if not hasattr(FSDPParam, "to_accumulated_grad_if_needed"):
        # Automodel 0.7.0 wraps this FSDPParam method, which newer torch no
        # longer has (nor calls): there is nothing to guard, so skip the patch.
        parallelizer._patch_fsdp_accumulated_grad_guard = lambda: None
    fsdp2_strategy_parallelize = parallelizer.fsdp2_strategy_parallelize
    mesh, _ = _create_fsdp2_device_mesh(
        ParallelismSizes(dp_size=dp, tp_size=tp, cp_size=cp), world_size=tp * dp * cp)
    f32 = MixedPrecisionPolicy(param_dtype=torch.float32, reduce_dtype=torch.float32,
                               output_dtype=torch.float32)
    return fsdp2_strategy_parallelize(model, mesh, mp_policy=f32), mesh


def loss_backward(logits, tgt):
    """Mean cross-entropy of logits against tgt, and its backward; logits
    that are a vocab-sharded DTensor go through loss_parallel."""
    from torch.distributed.tensor.parallel import loss_parallel
    import contextlib
    ctx = loss_parallel() if hasattr(logits, "placements") else contextlib.nullcontext()
    with ctx:
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 tgt.reshape(-1))
        loss.backward()
    return loss


def train_steps(model, steps, rank, step, shown_loss=None):
    """STEPS AdamW steps (clipped at 1.0), each timed between barriers:
    step() runs forward and backward and returns the loss; rank 0 prints
    shown_loss(loss) (default: the loss itself, gathered). Returns the
    step times."""
    import torch.distributed as dist
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    times = []
    for i in range(steps):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = step()
        gn = clip_mixed(model.parameters(), 1.0)
        opt.step()
        dist.barrier()
        times.append(time.perf_counter() - t0)
        lv = shown_loss(loss) if shown_loss else (
            loss.full_tensor() if hasattr(loss, "full_tensor") else loss)
        if rank == 0:
            print(f"torch step {i} loss {lv.item():.6f} grad_norm {gn.item():.6f} "
                  f"time {times[-1]:.3f} s", flush=True)
    return times


def mesh_rank(rank, args):
    model_dir, tokens, b, t, steps, threads, tp, dp = args
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=rank, world_size=tp * dp)
    torch.set_num_threads(threads)
    model = load(model_dir)
    if automodel_version() is not None:
        model, mesh = automodel_parallelize(model, tp, dp)
    else:
        mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp_shard", "tp"))
    if automodel_version() is None and tp > 1:
        plan = {"model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),
                "lm_head": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False)}
        for i in range(len(model.model.layers)):
            p = f"model.layers.{i}."
            for n in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                      "mlp.gate_proj", "mlp.up_proj"):
                plan[p + n] = ColwiseParallel()
            for n in ("self_attn.o_proj", "mlp.down_proj"):
                plan[p + n] = RowwiseParallel()
        parallelize_module(model, mesh["tp"], plan)
    if automodel_version() is None and dp > 1:
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh["dp_shard"])
        fully_shard(model, mesh=mesh["dp_shard"])
    inp, tgt = batch(tokens, b, t)
    bl = b // dp
    di = mesh.get_local_rank("dp_shard")
    inp, tgt = inp[di * bl:(di + 1) * bl], tgt[di * bl:(di + 1) * bl]

    def step():
        return loss_backward(model(input_ids=inp).logits, tgt)
    times = train_steps(model, steps, rank, step)
    report(times, b, t, rank)
    dist.destroy_process_group()


def main():
    if sys.argv[1:] == ["--which"]:
        v = automodel_version()
        print(f"torch {torch.__version__} + NeMo Automodel {v} fsdp2_strategy_parallelize"
              if v else f"torch {torch.__version__}, hand-written DTensor plan "
              "(nemo_automodel not importable)")
        return
    model_dir, tokens, b, t, steps, threads = sys.argv[1:7]
    b, t, steps, threads = int(b), int(t), int(steps), int(threads)
    tp, dp = (int(sys.argv[7]), int(sys.argv[8])) if len(sys.argv) > 8 else (1, 1)
    if tp * dp == 1 and automodel_version() is None:
        world1(model_dir, tokens, b, t, steps, threads)
        return
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    torch.multiprocessing.spawn(mesh_rank, args=((model_dir, tokens, b, t, steps,
                                                  max(1, threads // (tp * dp)), tp, dp),),
                                nprocs=tp * dp, join=True)


if __name__ == "__main__":
    main()
