#!/usr/bin/env python3
"""moe_router_ref.py -- what transformers 5.25's own MoE routers give, as a
C header for tests/unit/runtime/test_moe_route.c (issue 29).

Pinned stack (README.md here); CPU only, nothing is downloaded.
Regenerate:  /work/upstream-venv/bin/python tools/upstream/moe_router_ref.py
(writes tests/unit/runtime/moe_router_ref.h; clang-format -i it after).

Per case, the router class is built from a stand-in config (only the
attributes its __init__ reads) with hidden_size = E and an identity gate
weight, so its logits are its input. Recorded: the logits, the
e_score_correction_bias, the top-k (index, weight) pairs the class returns
(sorted by index: DeepSeek-V3 / GLM-4-MoE take topk(sorted=False)), and the
gradient of sum over the chosen (t, e) of C[t, e] * weight w.r.t. the
logits by autograd, for a fixed C.
"""
import os
import types

import torch
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3TopkRouter
from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeTopkRouter
from transformers.models.mixtral.modeling_mixtral import MixtralTopKRouter
from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeTopKRouter

T = 6


def cfg(E, k, **kw):
    c = types.SimpleNamespace(hidden_size=E, num_experts=E, num_local_experts=E,
                              n_routed_experts=E, num_experts_per_tok=k,
                              norm_topk_prob=kw.get("norm", False),
                              n_group=kw.get("n_group", 1),
                              topk_group=kw.get("topk_group", 1),
                              routed_scaling_factor=kw.get("scale", 1.0),
                              router_jitter_noise=0.0)
    return c


# name, class, E, k, score (0 softmax, 1 sigmoid), norm, n_group, topk_group, scale
CASES = [
    ("qwen3_moe norm", Qwen3MoeTopKRouter, 8, 2, 0, True, 1, 1, 1.0),
    ("qwen3_moe", Qwen3MoeTopKRouter, 8, 3, 0, False, 1, 1, 1.0),
    ("mixtral", MixtralTopKRouter, 8, 2, 0, True, 1, 1, 1.0),
    ("deepseek_v3 grouped", DeepseekV3TopkRouter, 16, 4, 1, True, 4, 2, 2.5),
    ("glm4_moe", Glm4MoeTopkRouter, 8, 2, 1, True, 1, 1, 1.8),
    ("deepseek_v3 unnormalised", DeepseekV3TopkRouter, 8, 3, 1, False, 2, 1, 1.0),
]


def run(case, gen):
    name, cls, E, k, score, norm, ng, tg, scale = case
    r = cls(cfg(E, k, norm=norm, n_group=ng, topk_group=tg, scale=scale))
    with torch.no_grad():
        r.weight.copy_(torch.eye(E))
        bias = torch.zeros(E)
        if hasattr(r, "e_score_correction_bias"):
            bias = (torch.rand(E, generator=gen) - 0.5) * 0.2
            r.e_score_correction_bias.copy_(bias)
    x = (torch.rand(T, E, generator=gen) * 4 - 2).requires_grad_(True)
    C = torch.rand(T, E, generator=gen) * 2 - 1
    _, w, idx = r(x)
    (w * C.gather(1, idx)).sum().backward()
    order = idx.argsort(dim=-1)
    idx_s, w_s = idx.gather(1, order), w.detach().gather(1, order)
    return dict(name=name, E=E, k=k, score=score, norm=int(norm), ng=ng, tg=tg,
                scale=scale, logits=x.detach(), bias=bias, C=C, idx=idx_s,
                w=w_s, grad=x.grad)


def arr(v):
    return "{" + ", ".join(repr(float(a)) + "f" if isinstance(a, float) else str(a)
                           for a in v) + "}"


def main():
    gen = torch.Generator().manual_seed(29)
    out = ["/* moe_router_ref.h -- written by tools/upstream/moe_router_ref.py",
           " * (transformers 5.25.0, torch 2.15.0): what transformers' own",
           " * routers return for these logits; see the script. Do not edit. */",
           "#define MRR_T %d" % T,
           "typedef struct mrr_case {",
           "  const char *name;",
           "  int E, k, score, norm, n_group, topk_group;",
           "  double scale;",
           "  const float *logits, *bias, *C; /* [T*E], [E], [T*E] */",
           "  const int *idx;       /* [T*k] chosen experts, by index */",
           "  const float *w, *grad; /* [T*k] their weights, [T*E] */",
           "} mrr_case;"]
    entries = []
    for i, c in enumerate(CASES):
        d = run(c, gen)
        for key in ("logits", "bias", "C", "w", "grad"):
            vals = [float("%.9g" % v) for v in d[key].flatten().tolist()]
            out.append("static const float mrr_%s_%d[] = %s;" % (key, i, arr(vals)))
        out.append("static const int mrr_idx_%d[] = %s;" % (i, arr(d["idx"].flatten().tolist())))
        entries.append('  {"%s", %d, %d, %d, %d, %d, %d, %r, mrr_logits_%d, mrr_bias_%d, '
                       'mrr_C_%d, mrr_idx_%d, mrr_w_%d, mrr_grad_%d},'
                       % (d["name"], d["E"], d["k"], d["score"], d["norm"], d["ng"], d["tg"],
                          d["scale"], i, i, i, i, i, i))
    out.append("static const mrr_case mrr_cases[] = {")
    out += entries
    out.append("};")
    path = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "unit", "runtime",
                        "moe_router_ref.h")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote", os.path.normpath(path))


if __name__ == "__main__":
    main()
