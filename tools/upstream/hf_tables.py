#!/usr/bin/env python3
"""hf_tables.py -- transformers' own tables as plain data for tpx's C reader:
every base_model_tp_plan, the checkpoint conversion rules (renames, fused
experts, q/k/v splits, transposes ...) and the buffers each text decoder's
state dict holds.

Pinned stack (README.md here): transformers 5.25.0 (+ torch 2.15.0; Automodel
only for tiny.py's type list). Nothing is downloaded.
Regenerate:  /work/upstream-venv/bin/python tools/upstream/hf_tables.py
Writes core/src/model/hf_conversion/{tp_plans,conversion,buffers}.json, each
recording transformers_version; see README.md in that folder for the fields.
Sources read: transformers/models/auto/configuration_auto.py CONFIG_MAPPING
(the config classes' base_model_tp_plan), transformers/conversion_mapping.py
(_build_checkpoint_conversion_mapping, _MODEL_TO_CONVERSION_PATTERN, the
"legacy" list, get_model_conversion_mapping), transformers/fusion_mapping.py
(through get_model_conversion_mapping), the model classes'
_checkpoint_conversion_mapping and _tp_plan, and each text decoder built
tiny on the meta device (tiny.py) for its resolved rules and its buffers.
"""
import copy
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, 'core', 'src', 'model', 'hf_conversion')
sys.path.insert(0, HERE)

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import conversion_mapping as cm  # noqa: E402
from transformers.core_model_loading import revert_weight_conversion  # noqa: E402
from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402
import tiny  # noqa: E402
from goldens import DTYPES, render  # noqa: E402

VERSION = transformers.__version__


def scalar(v):
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [scalar(x) for x in v]
    if isinstance(v, dict):
        return {str(k): scalar(x) for k, x in v.items()}
    return repr(v)


def op_data(op):
    d = {'op': type(op).__name__}
    for k, v in sorted(getattr(op, '__dict__', {}).items()):
        if not k.startswith('_') and not callable(v):
            d[k] = scalar(v)
    return d


def transform_data(t):
    """One WeightRenaming / WeightConverter (or subclass) as plain data."""
    d = {'kind': type(t).__name__,
         'source': list(t._original_source_patterns),
         'target': list(t._original_target_patterns)}
    if list(t.source_patterns) != d['source']:
        d['source_processed'] = list(t.source_patterns)
    if list(t.target_patterns) != d['target']:
        d['target_processed'] = list(t.target_patterns)
    d['regex'] = t.compiled_sources.pattern
    ops = getattr(t, 'operations', None)
    if ops:
        d['operations'] = [op_data(o) for o in ops]
    for k in ('scope_prefix', 'base_model_prefix'):
        if getattr(t, k, None):
            d[k] = t.__getattribute__(k)
    extra = {k: scalar(v) for k, v in getattr(t, '__dict__', {}).items()
             if not k.startswith('_') and not callable(v)}
    if extra:
        d['params'] = extra
    return d


def tp_plans():
    plans, seen = {}, {}
    for mt in sorted(CONFIG_MAPPING.keys()):
        try:
            cls = CONFIG_MAPPING[mt]
        except Exception:  # noqa: BLE001 - an entry whose module fails to import
            continue
        plan = getattr(cls, 'base_model_tp_plan', None)
        if not plan:
            continue
        name = cls.__name__
        if name in plans:
            plans[name]['model_types'].append(mt)
            continue
        plans[name] = {'model_types': [mt], 'base_model_tp_plan': scalar(dict(plan))}
        seen[mt] = name
    return plans


def class_tables(arch):
    cls = getattr(transformers, arch, None)
    out = {}
    if cls is None:
        return out
    for attr in ('_checkpoint_conversion_mapping', '_tp_plan'):
        v = getattr(cls, attr, None)
        if v:
            out[attr] = scalar(dict(v))
    return out


def _split_targets(model, rule):
    """{target pattern: the size along the split dim} of a Split rule, as
    transformers' Split reads them from the built model (the first
    parameter that holds the first target, the others by replacement)."""
    tg = rule['target']
    dim = next(o['dim'] for o in rule['operations'] if o['op'] == 'Split')
    names = [n for n, _ in model.named_parameters() if tg[0] in n]
    if not names:
        return None
    return [model.get_parameter(names[0].replace(tg[0], t)).shape[dim] for t in tg]


def split_sizes(model_type, arch, cfg, model, rule):
    """Each Split target's size as a function of the config, found by
    building the model again with one integer attribute doubled at a time:
    a size that doubles with each attribute it depends on and with no other
    is  coef * product(attributes)  -> [[coef, attr, ...]]; one target that
    fits no product is "rest" (the source's size less the others'). None
    when more than one target does not fit (the rule stays unapplied)."""
    base = _split_targets(model, rule)
    if base is None:
        return None
    ints = sorted(k for k, v in cfg.to_dict().items()
                  if isinstance(v, int) and not isinstance(v, bool) and v > 0)
    moved = {}
    for attr in ints:
        c = copy.deepcopy(cfg)
        setattr(c, attr, getattr(cfg, attr) * 2)
        try:
            moved[attr] = _split_targets(tiny.meta_model(model_type, arch, c), rule)
        except Exception:  # noqa: BLE001 - a doubled attribute the class refuses
            moved[attr] = None
    out, rest = [], 0
    for i, size in enumerate(base):
        deps = [a for a in ints if moved[a] is not None and moved[a][i] != size]
        prod = 1
        for a in deps:
            prod *= getattr(cfg, a)
        fits = deps and size % prod == 0 and all(moved[a][i] == 2 * size for a in deps)
        if fits:
            out.append([[size // prod] + deps])
        else:
            out.append('rest')
            rest += 1
    return out if rest <= 1 else None


def per_type(model_type, arch):
    """The rules get_model_conversion_mapping resolves for the CausalLM class
    (fusions and scopes included; the legacy list apart), and its buffers."""
    cfg = tiny.tiny_config(model_type)
    model = tiny.meta_model(model_type, arch, cfg)
    rules = [transform_data(t) for t in cm.get_model_conversion_mapping(model, add_legacy=False)]
    for r in rules:
        if any(o['op'] == 'Split' for o in r.get('operations', [])):
            r['split_sizes'] = split_sizes(model_type, arch, cfg, model, r)
    bufs = []
    for full, b, persistent in tiny.buffers(model):
        saved = None
        if persistent and full not in set(model._keys_to_ignore_on_save or ()):
            try:
                saved = list(revert_weight_conversion(model, {full: b}).keys())
            except Exception:  # noqa: BLE001 - a converter that needs its siblings
                saved = [full]
        bufs.append({'name': full, 'persistent': persistent,
                     'saved_as': saved, 'dtype': DTYPES.get(b.dtype, str(b.dtype))})
    return rules, bufs


def main():
    os.makedirs(OUT, exist_ok=True)
    head = {'transformers_version': VERSION, 'generated_by': 'tools/upstream/hf_tables.py'}
    plans = tp_plans()
    with open(os.path.join(OUT, 'tp_plans.json'), 'w', encoding='utf-8') as f:
        f.write(render(dict(head, plans=plans)) + '\n')

    raw = cm._build_checkpoint_conversion_mapping()
    aliases = dict(cm._MODEL_TO_CONVERSION_PATTERN)
    rules = {k: [transform_data(t) for t in v] for k, v in sorted(raw.items())
             if k not in aliases and k != 'legacy'}
    custom = tiny.automodel_custom_archs()
    types, buffers = {}, {}
    for mt, arch in tiny.text_decoder_types():
        entry = {'arch': arch, 'automodel_custom': arch in custom,
                 'config_class': type(CONFIG_MAPPING[mt]()).__name__}
        entry.update(class_tables(arch))
        try:
            r, b = per_type(mt, arch)
            entry['rules'] = r
            buffers[mt] = b
        except Exception as e:  # noqa: BLE001
            entry['error'] = '%s: %s' % (type(e).__name__, str(e)[:200])
            r = cm.get_checkpoint_conversion_mapping(mt)
            entry['rules_by_model_type'] = [transform_data(t) for t in r] if r else []
        types[mt] = entry
    conv = dict(head, aliases=aliases, legacy=[transform_data(t) for t in raw['legacy']],
                mappings=rules, text_decoders=types)
    with open(os.path.join(OUT, 'conversion.json'), 'w', encoding='utf-8') as f:
        f.write(render(conv) + '\n')
    with open(os.path.join(OUT, 'buffers.json'), 'w', encoding='utf-8') as f:
        f.write(render(dict(head, buffers=buffers)) + '\n')


if __name__ == '__main__':
    main()
