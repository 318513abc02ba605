#!/usr/bin/env python3
"""test_validate_tp_mesh.py -- `tpx plan --tp 2` against what NeMo Automodel
0.7.0's validate_tp_mesh does (tests/data/upstream/validate_tp_mesh/
cases.json, recorded by tools/upstream/validate_tp_mesh.py): at tp > 1 it
checks the head counts before the plan is chosen, for every plan (the
optimized plan, a custom plan, a named plan, the default plan), whether or
not the plan shards attention heads; a strategy with its own flow
(Nemotron-H) does not run it. Where upstream refuses, tpx's error
heads-not-divisible carries upstream's message; where it does not, tpx
reports no heads-not-divisible. config_cases: head counts of 0 or less,
absent or null, alone in a config (upstream's "Invalid attention head
counts" is tpx's heads-invalid).
Usage: test_validate_tp_mesh.py TPX  (Python 3 standard library only)."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, 'tests', 'data', 'upstream', 'validate_tp_mesh')
sys.path.insert(0, os.path.join(ROOT, 'tools', 'upstream'))
import compare  # noqa: E402 - write_sparse_safetensors


def plan_args(case):
    if case['path'] == 'custom':
        return ['--plan', os.path.join(DATA, 'plan_%s.json' % case['plan'])]
    if case['path'] == 'named':
        return ['--plan', case['plan']]
    return []


def run(tpx, name, case, tmp):
    d = os.path.join(DATA, name)
    with open(os.path.join(d, 'recipe.json'), encoding='utf-8') as f:
        tensors = json.load(f)['tensors']
    wdir = os.path.join(tmp, name)
    os.makedirs(wdir)
    compare.write_sparse_safetensors(os.path.join(wdir, 'model.safetensors'), tensors)
    cmd = [tpx, 'plan', '--config', os.path.join(d, 'config.json'), '--weights', wdir,
           '--tp', '2', '--no-isolation', '--format', 'json'] + plan_args(case)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    try:
        return json.loads(p.stdout.decode('utf-8', 'replace')), None
    except ValueError:
        return None, 'exit %d: %s' % (p.returncode, p.stderr.decode('utf-8', 'replace')[-300:])


def check(tpx, name, case, tmp):
    report, why = run(tpx, name, case, tmp)
    if report is None:
        return why
    heads = [x for x in report.get('diagnostics', []) if x.get('code') == 'heads-not-divisible']
    up = case['upstream']
    if up == 'ok':
        return 'tpx reports %s; upstream applies the plan' % heads[0]['message'] if heads else None
    want = up['refused']['message']
    if not heads:
        return 'upstream refuses (%s), tpx reports no heads-not-divisible' % want
    if heads[0].get('level') != 'error' or want not in heads[0].get('message', ''):
        return 'tpx says %s: %s; upstream: %s' % (heads[0].get('level'), heads[0].get('message'),
                                                   want)
    return None


def check_config(tpx, i, case, tmp):
    """config_cases: the attributes alone in a config, one embedding tensor
    (the default plan; upstream called validate_tp_mesh directly)."""
    d = os.path.join(tmp, 'config_case_%d' % i)
    os.makedirs(d)
    with open(os.path.join(d, 'config.json'), 'w', encoding='utf-8') as f:
        json.dump(dict(case['config'], architectures=[case['class']]), f)
    compare.write_sparse_safetensors(os.path.join(d, 'model.safetensors'),
                                     [['model.embed_tokens.weight', 'bf16', [64, 64]]])
    cmd = [tpx, 'plan', '--config', os.path.join(d, 'config.json'), '--weights', d,
           '--tp', str(case['tp']), '--no-isolation', '--format', 'json']
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    try:
        report = json.loads(p.stdout.decode('utf-8', 'replace'))
    except ValueError:
        return 'exit %d: %s' % (p.returncode, p.stderr.decode('utf-8', 'replace')[-300:])
    heads = [x for x in report.get('diagnostics', [])
             if x.get('code') in ('heads-not-divisible', 'heads-invalid')]
    if case['upstream'] == 'ok':
        return 'tpx reports %s; upstream passes' % heads[0]['message'] if heads else None
    want = case['upstream']['refused']['message']
    if not any(x.get('level') == 'error' and want in x.get('message', '') for x in heads):
        return 'upstream: %s; tpx: %s' % (want, [x.get('message') for x in heads])
    return None


def main():
    tpx = sys.argv[1]
    with open(os.path.join(DATA, 'cases.json'), encoding='utf-8') as f:
        data = json.load(f)
    cases = data['cases']
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, case in cases.items():
            why = check(tpx, name, case, tmp)
            print('%-28s %-8s %-5s %s' % (name, case['path'],
                                         'ok' if case['upstream'] == 'ok' else 'refuse',
                                         'agree' if not why else 'DIFFER: ' + why))
            bad += why is not None
        configs = data.get('config_cases', [])
        for i, case in enumerate(configs):
            why = check_config(tpx, i, case, tmp)
            print('config %-60s tp=%-2d %-6s %s' % (
                json.dumps(case['config'], separators=(',', ':')), case['tp'],
                'ok' if case['upstream'] == 'ok' else 'refuse',
                'agree' if not why else 'DIFFER: ' + why))
            bad += why is not None
        cases = dict(cases, **{'config_%d' % i: c for i, c in enumerate(configs)})
    print('%d of %d cases agree' % (len(cases) - bad, len(cases)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
