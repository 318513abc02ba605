#!/usr/bin/env python3
"""torch_cp.py - the torch side of bench/cp: bench/train's checkpoint,
token batch, optimizer and step loop (torch_step.py, imported), on NeMo
Automodel 0.7.0's own (pp, dp_replicate, dp_shard, cp, tp) mesh and its
fsdp2_strategy_parallelize (FSDP over dp_shard_cp), one process per rank
over gloo. Every step the batch goes through Automodel's own
_make_cp_batch_and_ctx (torch's context_parallel buffers: each sequence cut
into 2*cp chunks, cp rank i keeping chunks i and 2*cp-1-i) and the forward
and backward run inside the context it returns; Automodel's
attach_context_parallel_hooks is on every attention, as its dense-model
path does.

Attention under cp ("--attn"):
- context_parallel: torch's own ring SDPA (the allgather rotate method),
  what Automodel runs. It does not run on CPU in torch 2.15: the CPU SDPA
  kernel (aten._scaled_dot_product_flash_attention_for_cpu) has no DTensor
  sharding rule nor context-parallel handler. `--probe` tries it on a tiny
  model and prints the error.
- allgather (the fallback): the same method by hand, eager math: K and V
  all-gathered over cp (autograd: their gradients reduce-scattered, as
  all-to-all + sum, since gloo has no reduce-scatter), the causal mask
  from the global positions of the head-tail layout.
The time spent in the fallback's K/V collectives is measured (forward and
backward) and printed as cp_s.

Prints RESULT step_s=<mean of the steps after the first> tokens_s=...
[cp_s=...]; the loss printed is the mean over the whole batch.
usage: torch_cp.py MODEL_DIR TOKENS B T STEPS THREADS TP CP [ATTN]
       torch_cp.py --which | --probe"""
import os
import socket
import sys
import time
import traceback

import torch
import torch.distributed as dist
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
import torch_step as ts  # noqa: E402

ATTN_NAME = "tpx_bench_cp_allgather"
cp_seconds = [0.0]  # this rank's time in the fallback's K/V collectives


def head_tail_positions(t, cp, r):
    """The global positions cp rank r holds of a length-t sequence: chunks
    r and 2*cp-1-r of 2*cp (torch's context_parallel layout)."""
    c = t // (2 * cp)
    return torch.cat([torch.arange(r * c, (r + 1) * c),
                      torch.arange((2 * cp - 1 - r) * c, (2 * cp - r) * c)])


class GatherSeq(torch.autograd.Function):
    """All-gather of [B, H, t, D] over the cp group along t (rank order);
    backward: the sum over cp of each rank's slice (all-to-all + sum).
    Both directions add their time to cp_seconds."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        t0 = time.perf_counter()
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, x.contiguous(), group=group)
        cp_seconds[0] += time.perf_counter() - t0
        return torch.cat(parts, dim=2)

    @staticmethod
    def backward(ctx, g):
        t0 = time.perf_counter()
        n = dist.get_world_size(ctx.group)
        send = list(g.contiguous().chunk(n, dim=2))
        recv = [torch.empty_like(p) for p in send]
        dist.all_to_all(recv, [p.contiguous() for p in send], group=ctx.group)
        cp_seconds[0] += time.perf_counter() - t0
        return torch.stack(recv).sum(0), None


def allgather_attention(group, t):
    """A transformers attention function: eager attention of the local
    queries against K and V gathered over the cp group, causal by global
    position."""
    cp, r = dist.get_world_size(group), dist.get_rank(group)
    qpos = head_tail_positions(t, cp, r)
    kpos = torch.cat([head_tail_positions(t, cp, i) for i in range(cp)])
    hidden = kpos[None, :] > qpos[:, None]  # keys after the query

    def attn(module, q, k, v, attention_mask, scaling=None, dropout=0.0, **kwargs):
        k = transformers.models.llama.modeling_llama.repeat_kv(
            GatherSeq.apply(k, group), module.num_key_value_groups)
        v = transformers.models.llama.modeling_llama.repeat_kv(
            GatherSeq.apply(v, group), module.num_key_value_groups)
        w = torch.matmul(q, k.transpose(2, 3)) * scaling
        w = w.masked_fill(hidden, float("-inf"))
        w = torch.nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        return torch.matmul(w, v).transpose(1, 2).contiguous(), w
    return attn


def cp_rank(rank, args):
    model_dir, tokens, b, t, steps, threads, tp, cp, attn = args
    from nemo_automodel.components.distributed.context_parallel.utils import (
        _make_cp_batch_and_ctx, attach_context_parallel_hooks)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=rank, world_size=tp * cp)
    torch.set_num_threads(threads)
    impl = {"context_parallel": "sdpa", "allgather": ATTN_NAME}.get(attn, "eager")
    if cp == 1:
        impl = "eager"
    else:
        # the group is known only once the mesh exists: register first,
        # with a function that looks it up
        fns = {}
        transformers.AttentionInterface.register(
            ATTN_NAME, lambda *a, **k: fns["f"](*a, **k))
    model = ts.load(model_dir, impl)
    model, mesh = ts.automodel_parallelize(model, tp, 1, cp)
    if cp > 1:
        fns["f"] = allgather_attention(mesh["cp"].get_group(), t)
        attach_context_parallel_hooks(model)
    inp, tgt = ts.batch(tokens, b, t)
    cp_group = mesh["cp"].get_group() if cp > 1 else None

    def step():
        sharded = {"input_ids": inp.clone(), "labels": tgt.clone(),
                   "position_ids": torch.arange(t).expand(b, t).clone()}
        ctx, sharded, _ = _make_cp_batch_and_ctx(mesh, sharded)
        with ctx():
            logits = model(input_ids=sharded["input_ids"],
                           position_ids=sharded["position_ids"]).logits
            return ts.loss_backward(logits, sharded["labels"])

    def whole_batch_loss(loss):
        lv = (loss.full_tensor() if hasattr(loss, "full_tensor") else loss).detach()
        if cp_group is not None:  # equal token counts: the mean of the means
            dist.all_reduce(lv, group=cp_group)
            lv = lv / cp
        return lv

    cps = []

    def timed_step():
        c0 = cp_seconds[0]
        loss = step()
        cps.append(cp_seconds[0] - c0)
        return loss
    times = ts.train_steps(model, steps, rank, timed_step, whole_batch_loss)
    ts.report(times, b, t, rank)
    if rank == 0 and cp > 1 and attn == "allgather":
        c = cps[1:] if len(cps) > 1 else cps
        print(f"CP cp_s={sum(c) / len(c):.4f}", flush=True)
    dist.destroy_process_group()


def probe_rank(rank, _):
    """One forward + backward of a tiny Llama at cp 2 under Automodel's cp
    path with torch's context_parallel SDPA; rank 0 prints the outcome."""
    from nemo_automodel.components.distributed.context_parallel.utils import (
        _make_cp_batch_and_ctx, attach_context_parallel_hooks)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=64, num_hidden_layers=1, num_attention_heads=4,
                                   num_key_value_heads=4, intermediate_size=128,
                                   vocab_size=256)
    cfg._attn_implementation = "sdpa"
    model, mesh = ts.automodel_parallelize(transformers.LlamaForCausalLM(cfg), 1, 1, 2)
    attach_context_parallel_hooks(model)
    ids = torch.randint(0, 256, (1, 17))
    batch = {"input_ids": ids[:, :16].clone(), "labels": ids[:, 1:].clone(),
             "position_ids": torch.arange(16)[None].clone()}
    try:
        ctx, batch, _ = _make_cp_batch_and_ctx(mesh, batch)
        with ctx():
            logits = model(input_ids=batch["input_ids"],
                           position_ids=batch["position_ids"]).logits
            ts.loss_backward(logits, batch["labels"])
        msg = "runs on CPU/gloo"
    except Exception as e:  # the answer sought, not a failure of the probe
        frame = traceback.extract_tb(e.__traceback__)[-1]
        msg = (f"does not run on CPU/gloo: {type(e).__name__}: {str(e).splitlines()[0]} "
               f"({os.path.basename(frame.filename)}:{frame.lineno})")
    if rank == 0:
        print(f"PROBE torch {torch.__version__} context_parallel {msg}", flush=True)
    dist.destroy_process_group()


def spawn(fn, args, nprocs):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    torch.multiprocessing.spawn(fn, args=(args,), nprocs=nprocs, join=True)


def main():
    if sys.argv[1:] == ["--which"]:
        v = ts.automodel_version()
        print(f"torch {torch.__version__} + NeMo Automodel {v} fsdp2_strategy_parallelize"
              " + _make_cp_batch_and_ctx" if v else "none (nemo_automodel not importable: "
              "the cp runs need it)")
        return
    if sys.argv[1:] == ["--probe"]:
        spawn(probe_rank, None, 2)
        return
    model_dir, tokens, b, t, steps, threads, tp, cp = sys.argv[1:9]
    b, t, steps, threads, tp, cp = map(int, (b, t, steps, threads, tp, cp))
    attn = sys.argv[9] if len(sys.argv) > 9 else "allgather"
    if t % (2 * cp):
        sys.exit(f"torch_cp.py: T {t} is not divisible by 2 x cp = {2 * cp}")
    spawn(cp_rank, (model_dir, tokens, b, t, steps, max(1, threads // (tp * cp)), tp, cp,
                    attn), tp * cp)


if __name__ == "__main__":
    main()
