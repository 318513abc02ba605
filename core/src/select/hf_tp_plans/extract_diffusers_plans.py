#!/usr/bin/env python3
"""extract_diffusers_plans.py SRC OUT_DIR -- write every Diffusers model
class's `_tp_plan` as OUT_DIR/<Class>._tp_plan.json, the way
embed_hf_plans.py bundles transformers' base_model_tp_plan tables.

SRC is an unpacked diffusers package (the `diffusers` directory of its
wheel, e.g. `pip download diffusers==0.42.1 --no-deps` and unzip). The
sources are read with `ast`, never imported, so neither torch nor diffusers
has to be installed. Key order is kept. A value that is not a string (a
ParallelStyle object such as PackedColwiseParallel([1, 1])) is written as
its class name in snake case without "Parallel" ("packed_colwise"): NeMo
Automodel's translation accepts only the style strings colwise, rowwise,
colwise_rep, rowwise_rep and sequence_parallel, so such a plan is as
unusable upstream as it is in tpx (hf-style-unsupported), and the name says
why."""
import ast
import json
import os
import re
import sys


def style_of(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Call):
        f = node.func
        name = f.id if isinstance(f, ast.Name) else getattr(f, 'attr', '?')
        name = re.sub(r'Parallel$', '', name)
        return re.sub(r'(?<!^)(?=[A-Z])', '_', name).lower()
    raise ValueError('unexpected _tp_plan value: %s' % ast.dump(node))


def plans_in(path):
    with open(path, encoding='utf-8') as f:
        tree = ast.parse(f.read(), path)
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for st in cls.body:
            if (isinstance(st, ast.Assign) and len(st.targets) == 1 and
                    isinstance(st.targets[0], ast.Name) and
                    st.targets[0].id == '_tp_plan' and
                    isinstance(st.value, ast.Dict)):
                plan = {}
                for k, v in zip(st.value.keys, st.value.values):
                    plan[k.value] = style_of(v)
                yield cls.name, plan


def main():
    src, out = sys.argv[1], sys.argv[2]
    found = []
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if name.endswith('.py'):
                path = os.path.join(root, name)
                for cls, plan in plans_in(path):
                    with open(os.path.join(out, cls + '._tp_plan.json'), 'w',
                              encoding='utf-8') as f:
                        json.dump(plan, f, indent=2)
                        f.write('\n')
                    found.append('%s (%s)' % (cls, os.path.relpath(path, src)))
    print('\n'.join(sorted(found)))


if __name__ == '__main__':
    main()
