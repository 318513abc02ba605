#!/usr/bin/env python3
"""torch_moe.py - the model maker and the torch side of bench/moe.

--make writes the benchmark's random Qwen3-MoE with transformers'
Qwen3MoeForCausalLM.save_pretrained (config.json + f32 model.safetensors,
per-expert tensors as save_pretrained writes them), so tpx-train and torch
load the same checkpoint, and the token batch (int32 little-endian
[B, T + 1], uniform over the vocabulary: bench/train's format). Weights are
transformers' own initialisation under torch.manual_seed(0); the router's
auxiliary loss is off (router_aux_loss_coef 0), as issue 29's fixtures have
it. It prints the parameter counts and the matmul FLOP per trained token.

The runs (one gloo process per rank, world = ep, dp_shard = ep, ep_shard 1:
Automodel 0.7.0's _create_moe_mesh over the same ranks) use one of:
- automodel: NeMo Automodel 0.7.0's own Qwen3MoeForCausalLM
  (nemo_automodel.components.models.qwen3_moe) with BackendConfig()'s
  defaults on a machine without CUDA (sdpa attention, torch linear and
  fp32 RMSNorm, experts "torch": the per-expert loop, dispatcher "torch":
  the GroupedExperts all-gather), the checkpoint loaded through its state
  dict adapter (from_hf), parallelised by Automodel's own MeshContext +
  parallelize_model (at ep > 1 its MoE parallelize_model: ExpertParallel
  on the ep mesh, FSDP2 over dp_shard, in f32), each step as Automodel's
  train_ft recipe runs one: prepare_for_final_backward, forward, mean
  cross-entropy, backward, scale_grads_and_clip_grad_norm (1.0) with the
  ep mesh, AdamW.
  Two shims, printed by --which: (1) the class builds its RotaryEmbedding
  with device cuda:<torch.cuda.current_device()>, which raises without a
  GPU, so current_device answers 0 during construction and the rotary
  embedding's device is then set to CPU (the field Automodel's own
  initialize_weights sets); (2) Automodel 0.7.0 patches a FSDPParam method
  torch 2.15 no longer has, so that patch is skipped (as bench/train does).
- transformers: transformers' Qwen3MoeForCausalLM (eager attention, its
  fused experts) under Automodel's fsdp2_strategy_parallelize, ep 1 only;
  the fallback when the probe finds Automodel's class does not run here.

The share of the step in the MoE dispatch (automodel at ep > 1) is the
time in GroupedExperts' token dispatch and combine, forward and backward:
_gather_ep_inputs (the all-gathers of the token counts, activations,
routing weights, expert ids and mask over ep), the backward of its
differentiable all-gathers (an all-reduce + narrow in Automodel 0.7.0) and
the combine's all-reduce (torch.distributed.nn.functional's _AllReduce,
forward and backward). Printed as "MOE dispatch_s=" (rank 0, the mean of
the steps after the first).

Prints RESULT step_s=<mean of the steps after the first> tokens_s=...
usage: torch_moe.py --make DIR H L NH KV MOE_I E TOPK V B T
       torch_moe.py MODEL_DIR TOKENS B T STEPS THREADS EP [IMPL]
       torch_moe.py --which | --probe"""
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

dispatch_seconds = [0.0]  # this rank's time in the MoE dispatch and combine


def make(out, h, layers, nh, kv, moe_i, experts, topk, vocab, b, t):
    """The random Qwen3-MoE (save_pretrained) and the token batch."""
    import numpy as np
    torch.manual_seed(0)
    cfg = transformers.Qwen3MoeConfig(
        hidden_size=h, num_hidden_layers=layers, num_attention_heads=nh,
        num_key_value_heads=kv, head_dim=h // nh, intermediate_size=moe_i,
        moe_intermediate_size=moe_i, num_experts=experts, num_experts_per_tok=topk,
        norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[],
        vocab_size=vocab, max_position_embeddings=4096, rms_norm_eps=1e-6,
        router_aux_loss_coef=0.0, output_router_logits=False,
        tie_word_embeddings=False, use_cache=False, dtype="float32")
    model = transformers.Qwen3MoeForCausalLM(cfg).to(torch.float32)
    model.save_pretrained(out)
    rng = np.random.default_rng(0)
    rng.integers(0, vocab, size=(b, t + 1), dtype=np.int32).astype("<i4").tofile(
        os.path.join(out, "tokens.bin"))
    total = sum(p.numel() for p in model.parameters())
    hd = h // nh
    attn = h * nh * hd + 2 * h * kv * hd + nh * hd * h
    active = layers * (attn + h * experts + topk * 3 * h * moe_i) + vocab * h
    flops = 6 * active + 12 * layers * t * nh * hd
    print(f"MODEL params={total} expert_params={layers * experts * 3 * h * moe_i} "
          f"active_matmul_params={active} mflop_per_token={flops / 1e6:.1f}")


def automodel_class_shims():
    """Automodel 0.7.0 on CPU with torch 2.15: the accumulated-grad patch
    torch no longer needs, skipped in both parallelizers."""
    from nemo_automodel.components.distributed import parallelizer
    import nemo_automodel.components.moe.parallelizer as moe_parallelizer
    from torch.distributed.fsdp._fully_shard._fsdp_param import FSDPParam
    if not hasattr(FSDPParam, "to_accumulated_grad_if_needed"):
        parallelizer._patch_fsdp_accumulated_grad_guard = lambda: None
        moe_parallelizer._patch_fsdp_accumulated_grad_guard = lambda: None


def build_automodel(model_dir):
    """Automodel's own Qwen3MoeForCausalLM with the checkpoint's weights."""
    from safetensors.torch import load_file
    from nemo_automodel.components.models.common import BackendConfig
    from nemo_automodel.components.models.qwen3_moe.model import Qwen3MoeForCausalLM
    cfg = transformers.AutoConfig.from_pretrained(model_dir)
    real = torch.cuda.current_device
    torch.cuda.current_device = lambda: 0  # the class asks it for its rotary device
    try:
        model = Qwen3MoeForCausalLM(cfg, backend=BackendConfig())
    finally:
        torch.cuda.current_device = real
    model.model.rotary_emb.device = torch.device("cpu")
    hf = {}
    for name in sorted(os.listdir(model_dir)):
        if name.endswith(".safetensors"):
            hf.update(load_file(os.path.join(model_dir, name)))
    model.load_state_dict(model.state_dict_adapter.from_hf(hf), strict=True)
    return model.to(torch.float32)


def time_dispatch():
    """Adds the MoE dispatch and combine time of every rank to
    dispatch_seconds (see the module's docstring for what is timed)."""
    from nemo_automodel.components.moe import experts
    import torch.distributed.nn.functional as dnf

    def timed(fn):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                dispatch_seconds[0] += time.perf_counter() - t0
        return wrapper
    import inspect
    for cls, name in ((experts.GroupedExperts, "_gather_ep_inputs"),
                      (experts._AllGatherConcatVarlenFn, "backward"),
                      (dnf._AllReduce, "forward")):
        raw = inspect.getattr_static(cls, name)
        if isinstance(raw, staticmethod):
            setattr(cls, name, staticmethod(timed(raw.__func__)))
        else:
            setattr(cls, name, timed(raw))


def mesh_context(world, ep):
    from torch.distributed.fsdp import MixedPrecisionPolicy
    from nemo_automodel.components.distributed.config import FSDP2Config
    from nemo_automodel.components.distributed.mesh import MeshContext, ParallelismSizes
    f32 = MixedPrecisionPolicy(param_dtype=torch.float32, reduce_dtype=torch.float32,
                               output_dtype=torch.float32)
    return MeshContext.build(FSDP2Config(mp_policy=f32),
                             ParallelismSizes(dp_size=world, ep_size=ep), world_size=world)


def logits_of(out):
    return out.logits if hasattr(out, "logits") else out


def automodel_rank(rank, world, ep, model_dir, tokens, b, t, steps, threads):
    from nemo_automodel.components.distributed.model_parallelizer import parallelize_model
    from nemo_automodel.components.training.utils import (prepare_for_final_backward,
                                                          scale_grads_and_clip_grad_norm)
    automodel_class_shims()
    if ep > 1:
        time_dispatch()
    model = build_automodel(model_dir)
    mc = mesh_context(world, ep)
    model = parallelize_model(model, mc)
    inp, tgt = ts.batch(tokens, b, t)
    bl = b // world
    inp, tgt = inp[rank * bl:(rank + 1) * bl], tgt[rank * bl:(rank + 1) * bl]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    times, disp = [], []
    for i in range(steps):
        dist.barrier()
        t0, d0 = time.perf_counter(), dispatch_seconds[0]
        opt.zero_grad()
        prepare_for_final_backward([model])
        loss = ts.loss_backward(logits_of(model(inp)), tgt)
        gn = scale_grads_and_clip_grad_norm(
            1.0, [model], norm_type=2.0, device_mesh=mc.device_mesh, moe_mesh=mc.moe_mesh,
            ep_axis_name="ep" if mc.moe_mesh is not None else None, dp_group_size=world)
        opt.step()
        dist.barrier()
        times.append(time.perf_counter() - t0)
        disp.append(dispatch_seconds[0] - d0)
        lv = loss.detach().clone()
        dist.all_reduce(lv)
        if rank == 0:
            print(f"torch step {i} loss {lv.item() / world:.6f} grad_norm {float(gn):.6f} "
                  f"time {times[-1]:.3f} s", flush=True)
    ts.report(times, b, t, rank)
    if rank == 0 and ep > 1:
        d = disp[1:] if len(disp) > 1 else disp
        print(f"MOE dispatch_s={sum(d) / len(d):.4f}", flush=True)


def transformers_rank(rank, world, ep, model_dir, tokens, b, t, steps, threads):
    if ep > 1:
        sys.exit("torch_moe.py: the transformers fallback runs at ep 1 only")
    model = ts.load(model_dir)
    if ts.automodel_version() is not None:
        model, _ = ts.automodel_parallelize(model, 1, world)
    inp, tgt = ts.batch(tokens, b, t)
    bl = b // world
    inp, tgt = inp[rank * bl:(rank + 1) * bl], tgt[rank * bl:(rank + 1) * bl]
    times = ts.train_steps(model, steps, rank, lambda: ts.loss_backward(
        model(input_ids=inp).logits, tgt))
    ts.report(times, b, t, rank)


def run_rank(rank, args):
    impl, world, ep, model_dir, tokens, b, t, steps, threads = args
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(threads)
    fn = automodel_rank if impl == "automodel" else transformers_rank
    fn(rank, world, ep, model_dir, tokens, b, t, steps, threads)
    dist.destroy_process_group()


def probe_rank(rank, model_dir):
    """One step of Automodel's own Qwen3-MoE class on a tiny checkpoint at
    dp_shard 2 x ep 2 over gloo; rank 0 prints the outcome."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.set_num_threads(1)
    try:
        ids = torch.randint(0, 256, (2, 17), generator=torch.Generator().manual_seed(1))
        from nemo_automodel.components.distributed.model_parallelizer import parallelize_model
        automodel_class_shims()
        model = parallelize_model(build_automodel(model_dir), mesh_context(2, 2))
        ts.loss_backward(logits_of(model(ids[rank:rank + 1, :16])), ids[rank:rank + 1, 1:])
        msg = "runs on CPU/gloo at dp_shard 2 x ep 2"
    except Exception as e:  # the answer sought, not a failure of the probe
        frame = traceback.extract_tb(e.__traceback__)[-1]
        msg = (f"does not run on CPU/gloo: {type(e).__name__}: {str(e).splitlines()[0]} "
               f"({os.path.basename(frame.filename)}:{frame.lineno})")
    if rank == 0:
        print(f"PROBE NeMo Automodel {ts.automodel_version()} Qwen3MoeForCausalLM {msg}",
              flush=True)
    dist.destroy_process_group()


def spawn(fn, args, nprocs):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    torch.multiprocessing.spawn(fn, args=(args,), nprocs=nprocs, join=True)


def main():
    argv = sys.argv[1:]
    if argv == ["--which"]:
        v = ts.automodel_version()
        print(f"torch {torch.__version__} + NeMo Automodel {v}: its own Qwen3MoeForCausalLM"
              " (BackendConfig() on CPU: sdpa, experts 'torch' loop, dispatcher 'torch'"
              " all-gather), MeshContext + parallelize_model, f32; shims: rotary device"
              " set to CPU, FSDPParam grad-guard patch skipped" if v else
              f"torch {torch.__version__}, transformers' Qwen3MoeForCausalLM, no"
              " nemo_automodel (ep 1 only)")
        return
    if argv == ["--probe"]:
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            with open(os.devnull, "w") as null:
                so = sys.stdout
                sys.stdout = null
                try:
                    make(d, 64, 2, 4, 2, 32, 4, 2, 256, 2, 16)
                finally:
                    sys.stdout = so
            spawn(probe_rank, d, 2)
        return
    if argv[:1] == ["--make"]:
        make(argv[1], *map(int, argv[2:12]))
        return
    model_dir, tokens, b, t, steps, threads, ep = argv[:7]
    b, t, steps, threads, ep = map(int, (b, t, steps, threads, ep))
    impl = argv[7] if len(argv) > 7 else "automodel"
    world = ep
    if b % world:
        sys.exit(f"torch_moe.py: batch {b} is not divisible by dp_shard = {world}")
    spawn(run_rank, (impl, world, ep, model_dir, tokens, b, t, steps,
                     max(1, threads // world)), world)


if __name__ == "__main__":
    main()
