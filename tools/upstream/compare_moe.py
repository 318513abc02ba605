#!/usr/bin/env python3
"""compare_moe.py -- check `tpx plan` against the goldens recorded from the
MoE models NeMo Automodel 0.7.0 trains with its OWN classes
(tools/upstream/moe_goldens.py, tests/data/upstream_moe/). Python 3 standard
library only; nothing here needs torch or transformers.

usage: compare_moe.py --tpx PATH [--data DIR] [--known FILE] [--ratchet]
                      [--write-known FILE] [FAMILY...]

For each tests/data/upstream_moe/<family>/ (or the FAMILYs named) and each
case of golden.json it runs
  tpx plan --config config.json --dp-shard D [--tp T] [--ep E]
           --no-isolation --format json --rank R        (R = 0..world-1)
and compares, parameter by parameter: the names (tied aliases apart), shapes
and dtypes, the placement on every mesh dim of size > 1 (main mesh and MoE
mesh; a dim of size 1 holds the whole tensor either way), every rank's local
shape, every rank's parameter bytes, the tied parameters and the FSDP units
(module names). A refused case must be refused by tpx too, by a report with
an error or a message that is not a command-line error (an unknown --ep does
not count). One more case per family, `weights`: a header-only Hugging Face
checkpoint of hf_names.json's hf_tensors (a sparse model.safetensors)
planned with --weights at dp_shard 4 must give dp4_ep1's parameters, bytes
and persistent buffers (name, shape as the checkpoint stores it, dtype).
The dense_llama case: a dense Llama config at --ep 2 must be refused.
One line per case: agree | differ: FIRST DIFFERENCE | tpx refuses: WHY |
upstream refuses: WHY | both refuse (tpx's refusal names tp or ep / experts,
as upstream's cause) | tpx refuses for another cause | tpx rejects the
command line: WHY,
then the counts per case. With --ratchet, the cases listed in --known
(default tests/data/upstream_moe/known_differences.txt: "FAMILY CASE  #
note") may fail to agree; the exit status is 1 when a case not listed does
not agree, and listed cases that now agree are reported (they should leave
the list).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, 'tests', 'data', 'upstream_moe')
sys.path.insert(0, HERE)
import compare  # noqa: E402  (write_sparse_safetensors)

EXPERT_KEYS = ('n_routed_experts', 'num_local_experts', 'num_experts', 'moe_num_experts')
# What a tpx refusal must name to count as upstream's cause: tp for the
# tensor-parallel refusals, ep / experts for the expert-parallel ones.
TP_CAUSE = re.compile(r'\btp\b|tensor.parallel', re.I)
EP_CAUSE = re.compile(r'\bep\b|expert|moe', re.I)
CLI_ERRORS = ('unknown argument', 'unknown option', 'expects', 'see tpx plan --help')
DENSE_LLAMA = {
    'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'hidden_size': 64,
    'intermediate_size': 128, 'num_hidden_layers': 2, 'num_attention_heads': 4,
    'num_key_value_heads': 2, 'vocab_size': 512, 'tie_word_embeddings': False,
    'torch_dtype': 'bfloat16'}
KNOWN_HEADER = """\
# Cases where `tpx plan` does not agree today with what NeMo Automodel 0.7.0
# does to its own MoE classes (tests/data/upstream_moe/*/golden.json), read by
# tools/upstream/compare_moe.py --ratchet (the meson test
# upstream-moe-goldens): a case that does not agree must be listed here; a
# listed case that agrees is reported so it can leave the list.
# Columns: family case  # verdict: first difference
# Every recorded case agrees today (issue 27): the list is empty, and any
# case that stops agreeing fails the test until it is fixed or listed here
# with its reason. A family whose `weights` case is listed is skipped by
# tests/families/automodel_moe/round_trip.sh, with the note as its reason.
# Written by compare_moe.py --write-known.
"""


def run_tpx(tpx, config, dp, tp, ep, rank=None, weights=None):
    cmd = [tpx, 'plan', '--config', config, '--dp-shard', str(dp), '--no-isolation',
           '--format', 'json']
    if tp > 1:
        cmd += ['--tp', str(tp)]
    if ep > 1:
        cmd += ['--ep', str(ep)]
    if rank is not None:
        cmd += ['--rank', str(rank)]
    if weights:
        cmd += ['--weights', weights]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    try:
        return json.loads(p.stdout.decode('utf-8', 'replace')), p
    except ValueError:
        return None, p


def refusal(report, proc):
    """(kind, text): kind None when tpx planned, 'cli' for a command-line
    error, 'refused' for a real refusal."""
    if report is None:
        err = proc.stderr.decode('utf-8', 'replace').strip().splitlines()
        line = err[-1] if err else 'exit %d, no output' % proc.returncode
        if any(s in line for s in CLI_ERRORS):
            return 'cli', line
        return 'refused', line
    for d in report.get('diagnostics', []):
        if d.get('level') == 'error':
            return 'refused', '%s (%s)' % (d.get('code'), d.get('subject', ''))
    return None, ''


def golden_sizes(case):
    sizes = {}
    for key in ('main_mesh', 'moe_mesh'):
        m = case.get(key)
        if m:
            sizes.update(zip(m['dims'], m['sizes']))
    return sizes


def compare_params(golden, reports, weights=False):
    """None when they agree, else the first difference. reports: one
    tpx-report/1 per rank (with --rank), or one (weights)."""
    first = reports[0]
    sizes = golden_sizes(golden)
    for d, s in zip(first['mesh']['dims'], first['mesh']['sizes']):
        sizes[d] = max(sizes.get(d, 1), s)
    for m in first.get('moe_mesh', {}) and [first['moe_mesh']] or []:
        for d, s in zip(m.get('dims', []), m.get('sizes', [])):
            sizes[d] = max(sizes.get(d, 1), s)
    big = {d for d, s in sizes.items() if s > 1}
    gp = {p['name']: p for p in golden['parameters']}
    tps = [{p['name']: p for p in r['parameters']} for r in reports]
    tp0 = tps[0]
    tied = {n: p['tied_to'] for n, p in tp0.items() if p.get('tied_to')}
    up_only = [n for n in gp if n not in tp0]
    tpx_only = [n for n in tp0 if n not in gp and n not in tied]
    if up_only:
        return 'upstream parameter %s not in tpx (%d such; %d tpx names not upstream%s)' % (
            up_only[0], len(up_only), len(tpx_only), ', first ' + tpx_only[0] if tpx_only else '')
    if tpx_only:
        return 'tpx parameter %s not upstream (%d such)' % (tpx_only[0], len(tpx_only))
    if tied != golden.get('tied', {}):
        return 'tied %s vs upstream %s' % (tied, golden.get('tied', {}))
    for name, g in gp.items():
        t = tp0[name]
        if list(t['shape']) != g['shape'] or t['dtype'] != g['dtype']:
            return '%s: %s %s vs upstream %s %s' % (name, t['shape'], t['dtype'], g['shape'],
                                                    g['dtype'])
        for dim in sorted(big):
            mine = t['placements'].get(dim, 'replicate')
            up = g['placements'].get(dim, 'replicate')
            if mine != up:
                return '%s: %s on %s, upstream %s' % (name, mine, dim, up)
        if not weights:
            for r, tr in enumerate(tps):
                if list(tr[name].get('local_shape', [])) != g['local_shapes'][r]:
                    return '%s: rank %d local shape %s, upstream %s' % (
                        name, r, tr[name].get('local_shape'), g['local_shapes'][r])
    tbytes = [r['param_bytes'] for r in first['per_rank']]
    if tbytes != golden['per_rank_param_bytes']:
        return 'per-rank param bytes %s vs upstream %s' % (tbytes, golden['per_rank_param_bytes'])
    # Upstream's recorder sees a unit only through its parameter group, so
    # a unit without parameters (the outer root at ep > 1) is not listed.
    units = sorted(u['module'] for u in first['fsdp']['units'] if u['params'])
    gunits = sorted(u[0] for u in golden['fsdp_units'])
    if not weights and units != gunits:
        return 'FSDP units %s vs upstream %s' % (
            sorted(set(units) - set(gunits)), sorted(set(gunits) - set(units)))
    return None


def compare_buffers(golden, report, hf):
    """Persistent buffers: tpx reports the checkpoint's tensors (canonical
    names, the checkpoint's shape); upstream's buffers have Automodel's."""
    shapes = {n: s for n, _, s in hf['hf_tensors']}
    want = {}
    for name, shape, dtype, persistent in golden['buffers']:
        if not persistent:
            continue
        srcs = hf['to_hf'].get(name, [name])
        want[name] = (dtype, shapes.get(srcs[0], shape))
    got = {b['name']: (b['dtype'], list(b['shape'])) for b in (report.get('buffers') or {}).get('items', [])}
    if got != want:
        return 'buffers %s vs upstream %s' % (sorted(got), sorted(want))
    return None


def with_experts(config, n):
    """config with every expert-count key set to n, in the sub-configs
    too (a multimodal config keeps its text model's under text_config or
    thinker_config.text_config)."""
    cfg = dict(config)
    for k, v in cfg.items():
        if k in EXPERT_KEYS and isinstance(v, int) and not isinstance(v, bool):
            cfg[k] = n
        elif isinstance(v, dict) and k.endswith('_config'):
            cfg[k] = with_experts(v, n)
    return cfg


def check_family(tpx, fam, data):
    d = os.path.join(data, fam)
    with open(os.path.join(d, 'golden.json'), encoding='utf-8') as f:
        golden = json.load(f)
    with open(os.path.join(d, 'hf_names.json'), encoding='utf-8') as f:
        hf = json.load(f)
    with open(os.path.join(d, 'config.json'), encoding='utf-8') as f:
        config = json.load(f)
    out = []
    with tempfile.TemporaryDirectory(prefix='tpx-upstream-moe-') as tdir:
        for case, g in golden['cases'].items():
            cfg = with_experts(config, g['experts'])
            path = os.path.join(tdir, 'config.json')
            with open(path, 'w', encoding='utf-8') as f:
                json.dump(cfg, f)
            dp, tp, ep = g['dp_shard'], g['tp'], g['ep']
            reports, kind, why = [], None, ''
            for r in range(golden['world_size']):
                rep, proc = run_tpx(tpx, path, dp, tp, ep, rank=r)
                kind, why = refusal(rep, proc)
                if kind:
                    break
                reports.append(rep)
            out.append((case,) + verdict(g, kind, why, lambda: compare_params(g, reports)))
        wdir = os.path.join(tdir, 'weights')
        os.mkdir(wdir)
        with open(os.path.join(wdir, 'config.json'), 'w', encoding='utf-8') as f:
            json.dump(config, f)
        compare.write_sparse_safetensors(os.path.join(wdir, 'model.safetensors'), hf['hf_tensors'])
        g = golden['cases']['dp4_ep1']
        rep, proc = run_tpx(tpx, os.path.join(wdir, 'config.json'), 4, 1, 1, weights=wdir)
        kind, why = refusal(rep, proc)
        out.append(('weights',) + verdict(
            g, kind, why,
            lambda: compare_params(g, [rep], weights=True) or compare_buffers(g, rep, hf)))
    return out


def verdict(g, kind, why, diff_fn):
    if kind == 'cli':
        return 'tpx rejects the command line', why
    if 'refused' in g:
        uerr = '%s: %s' % (g['refused']['type'], g['refused']['message'].splitlines()[0][:120])
        if not kind:
            return 'upstream refuses', uerr
        cause = TP_CAUSE if g.get('tp', 1) > 1 and 'tensor-parallel' in uerr else EP_CAUSE
        if not cause.search(why):
            return 'tpx refuses for another cause', '%s (upstream: %s)' % (why, uerr)
        return 'both refuse', uerr
    if kind:
        return 'tpx refuses', why
    diff = diff_fn()
    return ('agree' if diff is None else 'differ'), diff or ''


def check_dense(tpx, data):
    with open(os.path.join(data, 'INDEX.json'), encoding='utf-8') as f:
        g = json.load(f)['families']['dense_llama']['dp4_ep2']
    with tempfile.TemporaryDirectory(prefix='tpx-upstream-moe-') as tdir:
        path = os.path.join(tdir, 'config.json')
        with open(path, 'w', encoding='utf-8') as f:
            json.dump(DENSE_LLAMA, f)
        rep, proc = run_tpx(tpx, path, g['dp_shard'], g['tp'], g['ep'])
        kind, why = refusal(rep, proc)
    return [('dp4_ep2',) + verdict(g, kind, why, lambda: None)]


def read_known(path):
    known = set()
    if os.path.exists(path):
        with open(path, encoding='utf-8') as f:
            for line in f:
                parts = line.split('#', 1)[0].split()
                if len(parts) >= 2:
                    known.add((parts[0], parts[1]))
    return known


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--tpx', required=True)
    ap.add_argument('--data', default=DATA)
    ap.add_argument('--known', default=None)
    ap.add_argument('--ratchet', action='store_true')
    ap.add_argument('--write-known', metavar='FILE')
    ap.add_argument('families', nargs='*')
    a = ap.parse_args()
    known = read_known(a.known or os.path.join(a.data, 'known_differences.txt'))
    fams = a.families or sorted(t for t in os.listdir(a.data)
                                if os.path.exists(os.path.join(a.data, t, 'golden.json')))
    counts, per_case, new_bad, now_ok, rows = {}, {}, [], [], []
    results = [(fam, check_family(a.tpx, fam, a.data)) for fam in fams]
    if not a.families or 'dense_llama' in a.families:
        results.append(('dense_llama', check_dense(a.tpx, a.data)))
    for fam, cases in results:
        for case, v, detail in cases:
            good = v in ('agree', 'both refuse')
            counts[v] = counts.get(v, 0) + 1
            c = per_case.setdefault(case, [0, 0])
            c[0] += good
            c[1] += 1
            listed = (fam, case) in known
            print('%-14s %-11s %-16s %s%s' % (fam, case, v, detail, '  [known]' if listed else ''))
            if not good:
                rows.append('%-14s %-11s # %s: %s' % (fam, case, v, detail[:110]))
            if good and listed:
                now_ok.append((fam, case))
            elif not good and not listed:
                new_bad.append((fam, case, v, detail))
    print('summary: %d cases, %s' % (sum(counts.values()),
                                     ', '.join('%s %d' % kv for kv in sorted(counts.items()))))
    print('agreeing per case: %s' % ', '.join('%s %d/%d' % (k, v[0], v[1])
                                              for k, v in sorted(per_case.items())))
    if a.write_known:
        with open(a.write_known, 'w', encoding='utf-8') as f:
            f.write(KNOWN_HEADER + '\n'.join(rows) + '\n')
    for fam, case in now_ok:
        print('NOW AGREES (remove from known_differences.txt): %s %s' % (fam, case))
    for fam, case, v, detail in new_bad:
        print('NOT LISTED: %s %s %s %s' % (fam, case, v, detail))
    return 1 if a.ratchet and new_bad else 0


if __name__ == '__main__':
    sys.exit(main())
