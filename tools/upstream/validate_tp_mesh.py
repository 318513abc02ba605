#!/usr/bin/env python3
"""validate_tp_mesh.py -- record when NeMo Automodel 0.7.0 checks the head
counts against tp (its validate_tp_mesh), for each way a plan is chosen:
the goldens of the CLI test validate-tp-mesh (tests/data/upstream/
validate_tp_mesh/, read by tests/upstream/test_validate_tp_mesh.py, the
meson test upstream-validate-tp-mesh).

Pinned stack as goldens.py (README.md here); CPU only, nothing downloaded.
Regenerate:  /work/upstream-venv/bin/python tools/upstream/validate_tp_mesh.py

Each case is a tiny config (tiny.tiny_config, heads changed) whose
num_attention_heads or num_key_value_heads tp 2 may not divide, and a plan
chosen the way `tpx plan` chooses it:
  plugin   no tp_shard_plan; the class has an optimized plan (Phi-3's does
           not shard attention heads, Llama's does)
  custom   tp_shard_plan = the dict of a Hugging Face tp_plan file
           (plan_<name>.json here, {pattern: "colwise"|"rowwise"}): an
           MLP-only plan shards no head
  named    tp_shard_plan = "llama_nemotron_super_tp_plan"
  default  no tp_shard_plan, a class with no optimized plan (its HF plan
           carries embedding_rowwise, so Automodel uses its default plan)
  own_flow the Nemotron-H model-owned parallelizer (NemotronHModelParallelizer)
           on transformers' NemotronHForCausalLM, as Automodel 0.7.0 attaches
           it to its Nemotron-H class
Each runs fsdp2_strategy_parallelize (or the parallelizer's _apply) on a tp 2
mesh under torch's fake process group, rank 0 and 1, and records either
"ok" or the refusal (exception type, message, raising function).
config_cases: validate_tp_mesh itself on a module holding only a config
(a namespace of the attributes given; FooForCausalLM, else M), for head
counts no real config class builds: 0, negative, absent, None.
Writes <case>/config.json and <case>/recipe.json (the header-only
checkpoint, as goldens.py writes it), plan_<name>.json and cases.json
(not golden.json: compare.py takes a folder holding one for a model type).
"""
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, 'tests', 'data', 'upstream', 'validate_tp_mesh')
sys.path.insert(0, HERE)

import torch.distributed as dist  # noqa: E402
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402

import goldens  # noqa: E402 - installs the FSDPParam shim, versions()
from goldens import remove_tied_weights_from_state_dict, revert_weight_conversion  # noqa: E402
import tiny  # noqa: E402
from nemo_automodel.components.distributed.mesh import ParallelismSizes  # noqa: E402
from nemo_automodel.components.distributed.mesh_utils import _create_fsdp2_device_mesh  # noqa: E402
from nemo_automodel.components.distributed.parallelizer import fsdp2_strategy_parallelize  # noqa: E402

PLANS = {
    'mlp_only': {'model.layers.*.mlp.gate_proj': 'colwise',
                 'model.layers.*.mlp.up_proj': 'colwise',
                 'model.layers.*.mlp.down_proj': 'rowwise'},
}
STYLES = {'colwise': ColwiseParallel, 'rowwise': RowwiseParallel}

# name: (model_type, arch, heads, kv_heads, path, plan)
CASES = {
    'plugin_phi3_heads3': ('phi3', 'Phi3ForCausalLM', 3, 3, 'plugin', None),
    'plugin_phi3_heads4': ('phi3', 'Phi3ForCausalLM', 4, 4, 'plugin', None),
    'plugin_llama_heads3': ('llama', 'LlamaForCausalLM', 3, 3, 'plugin', None),
    'custom_mlp_only_heads3': ('llama', 'LlamaForCausalLM', 3, 3, 'custom', 'mlp_only'),
    'custom_mlp_only_kv1': ('llama', 'LlamaForCausalLM', 4, 1, 'custom', 'mlp_only'),
    'custom_mlp_only_heads4': ('llama', 'LlamaForCausalLM', 4, 2, 'custom', 'mlp_only'),
    'named_heads3': ('llama', 'LlamaForCausalLM', 3, 3, 'named',
                     'llama_nemotron_super_tp_plan'),
    'default_olmo_heads3': ('olmo', 'OlmoForCausalLM', 3, 3, 'default', None),
    'own_flow_nemotron_h_heads3': ('nemotron_h', 'NemotronHForCausalLM', 3, 3,
                                   'own_flow', None),
}


# (class name, config attributes, tp)
CONFIG_CASES = [
    ('FooForCausalLM', {'num_attention_heads': 0}, 2),
    ('M', {'num_attention_heads': -6, 'num_key_value_heads': 4}, 4),
    ('M', {'num_attention_heads': 3, 'num_key_value_heads': -9223372036854775808}, 2),
    ('M', {'num_attention_heads': 6}, 4),
    ('M', {'num_attention_heads': 6, 'num_key_value_heads': 0}, 4),
    ('M', {'num_attention_heads': 6, 'num_key_value_heads': None}, 4),
    ('M', {'hidden_size': 64}, 2),
]


def config_case(cls_name, attrs, tp):
    import types
    import torch.nn as nn
    from nemo_automodel.components.distributed.parallelizer import validate_tp_mesh

    def init(self):
        nn.Module.__init__(self)
        self.config = types.SimpleNamespace(**attrs)
    model = type(cls_name, (nn.Module,), {'__init__': init})()
    mesh = types.SimpleNamespace(size=lambda: tp)
    try:
        validate_tp_mesh(model, mesh)
    except Exception as e:  # noqa: BLE001 - an upstream refusal is data
        return {'refused': {'type': type(e).__name__, 'message': str(e)}}
    return 'ok'


def config_for(model_type, arch, heads, kv):
    cfg = tiny.tiny_config(model_type)
    cfg.num_attention_heads = heads
    cfg.num_key_value_heads = kv
    cfg.head_dim = 16
    cfg.hidden_size = 48 if heads == 3 else 64
    cfg.architectures = [arch]
    return cfg


def recipe(model_type, arch, cfg):
    """The tensors save_pretrained writes (goldens.recipe, for this cfg)."""
    model = tiny.meta_model(model_type, arch, cfg)
    sd = model.state_dict()
    for k in model._keys_to_ignore_on_save or ():
        sd.pop(k, None)
    sd = remove_tied_weights_from_state_dict(sd, model)
    sd = revert_weight_conversion(model, sd)
    return [[k, goldens.DTYPES.get(v.dtype, str(v.dtype)), list(v.shape)] for k, v in sd.items()]


def parallelize(model, mesh, path, plan):
    if path == 'own_flow':
        from nemo_automodel.components.models.nemotron_v3.parallelization import (
            NemotronHModelParallelizer)
        from torch.distributed.fsdp import MixedPrecisionPolicy
        return NemotronHModelParallelizer()._apply(model, mesh,
                                                   mp_policy=MixedPrecisionPolicy())
    if path == 'custom':
        plan = {k: STYLES[v]() for k, v in PLANS[plan].items()}
    return fsdp2_strategy_parallelize(model, mesh, tp_shard_plan=plan)


def run(name):
    model_type, arch, heads, kv, path, plan = CASES[name]
    cfg = config_for(model_type, arch, heads, kv)
    for rank in range(2):
        dist.init_process_group('fake', store=FakeStore(), rank=rank, world_size=2)
        try:
            model = tiny.meta_model(model_type, arch, cfg)
            mesh, _ = _create_fsdp2_device_mesh(ParallelismSizes(tp_size=2, dp_size=1),
                                                world_size=2)
            parallelize(model, mesh, path, plan)
        except Exception as e:  # noqa: BLE001 - an upstream refusal is data
            tb = traceback.extract_tb(e.__traceback__)[-1]
            return cfg, {'refused': {'type': type(e).__name__, 'message': str(e)[:600],
                                     'function': tb.name}}
        finally:
            dist.destroy_process_group()
    return cfg, 'ok'


def main():
    os.makedirs(OUT, exist_ok=True)
    golden = dict(goldens.versions(), tp=2, cases={})
    for name, plan in PLANS.items():
        with open(os.path.join(OUT, 'plan_%s.json' % name), 'w', encoding='utf-8') as f:
            f.write(json.dumps(plan, indent=1) + '\n')
    for name, (model_type, arch, heads, kv, path, plan) in CASES.items():
        cfg, result = run(name)
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, 'config.json'), 'w', encoding='utf-8') as f:
            f.write(cfg.to_json_string(use_diff=False))
        goldens.dump(os.path.join(d, 'recipe.json'),
                     dict(goldens.versions(), tensors=recipe(model_type, arch, cfg)))
        golden['cases'][name] = {'model_type': model_type, 'arch': arch,
                                 'num_attention_heads': heads, 'num_key_value_heads': kv,
                                 'path': path, 'plan': plan, 'upstream': result}
        print(name, result, file=sys.stderr)
    golden['config_cases'] = [{'class': c, 'config': a, 'tp': tp, 'upstream': config_case(c, a, tp)}
                              for c, a, tp in CONFIG_CASES]
    goldens.dump(os.path.join(OUT, 'cases.json'), golden)


if __name__ == '__main__':
    main()
