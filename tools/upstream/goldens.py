#!/usr/bin/env python3
"""goldens.py -- record what NeMo Automodel does to transformers' own model
classes, as the goldens tests/upstream/compare.py checks `tpx plan` against.

Pinned stack (README.md here): transformers 5.25.0, nemo-automodel 0.7.0
(installed --no-deps), torch 2.15.0; CPU only, nothing is downloaded.
Regenerate:  /work/upstream-venv/bin/python tools/upstream/goldens.py [TYPE...]
(writes tests/data/upstream/<model_type>/ and tests/data/upstream/INDEX.json;
with TYPE arguments only those types are rewritten).

For every model type that is a text decoder with a base_model_tp_plan
(tiny.text_decoder_types) and whose CausalLM class is NOT in Automodel's own
MODEL_ARCH_MAPPING (nemo_automodel/_transformers/registry.py), i.e. the types
Automodel serves through its generic path:
  config.json   the tiny config (tiny.tiny_config: class defaults, shrunk),
                as PretrainedConfig.to_json_string(use_diff=False) writes it
  recipe.json   the header-only checkpoint: every tensor save_pretrained
                would write (model.state_dict() less _keys_to_ignore_on_save,
                less tied weights, through revert_weight_conversion -- the
                steps of PreTrainedModel.save_pretrained), as
                [name, dtype, shape]; all bf16
  golden.json   per case (tp2, tp2_sp, dp2_tp2, dp2_tp2_sp): the CausalLM
                class built on the meta device, then Automodel's real
                fsdp2_strategy_parallelize(model, mesh, sequence_parallel=sp)
                on the mesh of its _create_fsdp2_device_mesh (tp 2, dp_size
                1 or 2), under torch.distributed's "fake" backend (FakeStore),
                once per rank: every parameter's FQN, global shape, dtype,
                the DTensor mesh dim names and placements, and each rank's
                local shape; the buffers (persistent or not); Automodel's
                warnings (e.g. the fallback to its default plan); or the
                refusal (exception type and message).
Shim: torch 2.15 has no FSDPParam.to_accumulated_grad_if_needed, which
Automodel 0.7.0 patches unconditionally; a no-op one is installed first (it
only guards a post-backward path, nothing this records).
"""
import json
import logging
import os
import sys
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, 'tests', 'data', 'upstream')
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402
import transformers  # noqa: E402
from transformers.core_model_loading import revert_weight_conversion  # noqa: E402
from transformers.modeling_utils import remove_tied_weights_from_state_dict  # noqa: E402
from torch.distributed.fsdp._fully_shard._fsdp_param import FSDPParam  # noqa: E402

if not hasattr(FSDPParam, 'to_accumulated_grad_if_needed'):
    FSDPParam.to_accumulated_grad_if_needed = lambda self: None

import nemo_automodel  # noqa: E402
from nemo_automodel.components.distributed.mesh import ParallelismSizes  # noqa: E402
from nemo_automodel.components.distributed.mesh_utils import _create_fsdp2_device_mesh  # noqa: E402
from nemo_automodel.components.distributed.parallelizer import fsdp2_strategy_parallelize  # noqa: E402
import tiny  # noqa: E402

# Generic-path types left out on purpose, with the reason (none today:
# phi4_multimodal, once left out for its default-sized vision and audio
# encoders, is built with them shrunk, tiny.OVERRIDES).
EXCLUDED = {}
CASES = [('tp2', 1, False), ('tp2_sp', 1, True), ('dp2_tp2', 2, False), ('dp2_tp2_sp', 2, True)]
DTYPES = {torch.bfloat16: 'bf16', torch.float16: 'f16', torch.float32: 'f32',
          torch.float64: 'f64', torch.int64: 'i64', torch.int32: 'i32', torch.bool: 'bool',
          torch.uint8: 'u8', torch.int8: 'i8'}


def versions():
    return {'transformers_version': transformers.__version__,
            'automodel_version': getattr(nemo_automodel, '__version__', '0.7.0'),
            'torch_version': torch.__version__.split('+')[0]}


class Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        msg = record.getMessage()
        if msg not in self.lines:
            self.lines.append(msg)


def placement_str(pl):
    name = type(pl).__name__
    if name == 'Replicate':
        return 'replicate'
    if name == 'Partial':
        return 'partial'
    if name == '_StridedShard':
        return 'strided_shard(%d,%d)' % (pl.dim, pl.split_factor)
    if name == 'Shard':
        return 'shard(%d)' % pl.dim
    return repr(pl)


def one_rank(model_type, arch, rank, world, dp, sp):
    dist.init_process_group('fake', store=FakeStore(), rank=rank, world_size=world)
    try:
        cfg = tiny.tiny_config(model_type)
        model = tiny.meta_model(model_type, arch, cfg)
        mesh, _ = _create_fsdp2_device_mesh(ParallelismSizes(tp_size=2, dp_size=dp),
                                            world_size=world)
        model = fsdp2_strategy_parallelize(model, mesh, sequence_parallel=sp)
        params, seen, tied = [], {}, {}
        for name, p in model.named_parameters(remove_duplicate=False):
            if id(p) in seen:
                tied[name] = seen[id(p)]
                continue
            seen[id(p)] = name
            if hasattr(p, 'placements'):
                dims = [str(getattr(d, 'value', d)) for d in p.device_mesh.mesh_dim_names]
                pls = dict(zip(dims, (placement_str(x) for x in p.placements)))
                local = list(p.to_local().shape)
            else:
                pls, local = {}, list(p.shape)
            params.append([name, list(p.shape), DTYPES.get(p.dtype, str(p.dtype)), pls, local,
                           p.element_size()])
        bufs = [[full, list(b.shape), DTYPES.get(b.dtype, str(b.dtype)), persistent]
                for full, b, persistent in tiny.buffers(model)]
        return params, bufs, tied
    finally:
        dist.destroy_process_group()


def run_case(model_type, arch, world, dp, sp):
    cap = Capture()
    logging.getLogger().addHandler(cap)
    try:
        with warnings.catch_warnings(record=True) as wl:
            warnings.simplefilter('always')
            ranks = []
            for rank in range(world):
                try:
                    ranks.append(one_rank(model_type, arch, rank, world, dp, sp))
                except Exception as e:  # noqa: BLE001 - an upstream refusal is data
                    tb = traceback.extract_tb(e.__traceback__)[-1]
                    return {'refused': {'type': type(e).__name__, 'message': str(e)[:600],
                                        'where': '%s:%d' % (os.path.basename(tb.filename), tb.lineno)},
                            'warnings': cap.lines}
            for w in wl:
                m = str(w.message)
                if 'deprecated' not in m and m not in cap.lines:
                    cap.lines.append(m[:400])
    finally:
        logging.getLogger().removeHandler(cap)
    params = []
    for i, (name, shape, dtype, pls, _, _) in enumerate(ranks[0][0]):
        params.append({'name': name, 'shape': shape, 'dtype': dtype, 'placements': pls,
                       'local_shapes': [r[0][i][4] for r in ranks]})
    return {'mesh': {'dims': ['dp_replicate', 'dp_shard', 'cp', 'tp'], 'sizes': [1, dp, 1, 2]},
            'parameters': params, 'tied': ranks[0][2], 'buffers': ranks[0][1],
            'per_rank_param_bytes': [sum(_numel(p[4]) * p[5] for p in r[0]) for r in ranks],
            'warnings': [w[:400] for w in cap.lines]}


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def recipe(model_type, arch):
    cfg = tiny.tiny_config(model_type)
    model = tiny.meta_model(model_type, arch, cfg)
    sd = model.state_dict()
    for k in model._keys_to_ignore_on_save or ():
        sd.pop(k, None)
    sd = remove_tied_weights_from_state_dict(sd, model)
    sd = revert_weight_conversion(model, sd)
    tensors = [[k, DTYPES.get(v.dtype, str(v.dtype)), list(v.shape)] for k, v in sd.items()]
    return cfg, tensors


def render(obj, ind=0):
    """JSON with one line per dict member or list item of dicts/lists, leaves inline."""
    pad = ' ' * (ind + 1)
    if isinstance(obj, dict) and obj and any(isinstance(v, (dict, list)) for v in obj.values()):
        items = ['%s%s: %s' % (pad, json.dumps(k), render(v, ind + 1)) for k, v in obj.items()]
        return '{\n' + ',\n'.join(items) + '\n' + ' ' * ind + '}'
    if isinstance(obj, list) and obj and all(isinstance(v, (dict, list)) for v in obj):
        items = [pad + json.dumps(v, separators=(',', ':')) for v in obj]
        return '[\n' + ',\n'.join(items) + '\n' + ' ' * ind + ']'
    return json.dumps(obj, separators=(',', ':'))


def dump(path, obj):
    with open(path, 'w', encoding='utf-8') as f:
        f.write(render(obj) + '\n')


def main():
    only = set(sys.argv[1:])
    custom = tiny.automodel_custom_archs()
    index_path = os.path.join(OUT, 'INDEX.json')
    index = {}
    if only and os.path.exists(index_path):
        with open(index_path, encoding='utf-8') as f:
            index = json.load(f)['types']
    for model_type, arch in tiny.text_decoder_types():
        if only and model_type not in only:
            continue
        if arch in custom:
            index[model_type] = {'arch': arch, 'status': 'automodel-custom'}
            continue
        if model_type in EXCLUDED:
            index[model_type] = {'arch': arch, 'status': 'excluded', 'why': EXCLUDED[model_type]}
            continue
        try:
            cfg, tensors = recipe(model_type, arch)
        except Exception as e:  # noqa: BLE001
            index[model_type] = {'arch': arch, 'status': 'no-tiny-config',
                                 'why': '%s: %s' % (type(e).__name__, str(e)[:300])}
            print('skip', model_type, type(e).__name__, file=sys.stderr)
            continue
        d = os.path.join(OUT, model_type)
        os.makedirs(d, exist_ok=True)
        cfg.architectures = [arch]
        with open(os.path.join(d, 'config.json'), 'w', encoding='utf-8') as f:
            f.write(cfg.to_json_string(use_diff=False))
        dump(os.path.join(d, 'recipe.json'), dict(versions(), tensors=tensors))
        golden = dict(versions(), model_type=model_type, arch=arch, cases={})
        for case, dp, sp in CASES:
            golden['cases'][case] = run_case(model_type, arch, 2 * dp, dp, sp)
        dump(os.path.join(d, 'golden.json'), golden)
        index[model_type] = {'arch': arch, 'status': 'golden'}
        print(model_type, ' '.join('%s:%s' % (c, 'refused' if 'refused' in v else 'ok')
                                   for c, v in golden['cases'].items()), file=sys.stderr)
    dump(index_path, dict(versions(), types=dict(sorted(index.items()))))


if __name__ == '__main__':
    main()
