#!/usr/bin/env python3
"""compare.py -- check `tpx plan` against the goldens recorded from NeMo
Automodel 0.7.0 + transformers 5.25 (tools/upstream/goldens.py). Python 3
standard library only; nothing here needs torch or transformers.

usage: compare.py --tpx PATH [--data DIR] [--known FILE] [--ratchet] [TYPE...]

For each tests/data/upstream/<model_type>/ (or the TYPEs named) and each case
(tp2, tp2_sp, dp2_tp2, dp2_tp2_sp) it writes the header-only checkpoint of
recipe.json as a sparse model.safetensors in a temporary directory (the
header, then a hole of the data's size), runs
  tpx plan --config config.json --weights DIR --tp 2 [--dp-shard 2] [--sp]
           --no-isolation --format json
and compares, parameter by parameter, the placement on every mesh dim of
size > 1 (a dim of size 1 holds the whole tensor either way) and every
rank's parameter bytes with golden.json. One line per case:
  agree | differ: FIRST DIFFERENCE | tpx refuses: CODE | upstream refuses: ...
  | both refuse (the same named cause: SAME_CAUSE) | refuse differently
  | agree+flagged (the same placements and bytes, and tpx reports an error
    upstream does not: what upstream applies and then cannot run, DELIBERATE,
    each proven by forward_check.py) | deliberate (such an error, and a
    difference besides)
then the counts. With --ratchet, the cases listed in --known (default
tests/data/upstream/known_differences.txt: "TYPE CASE CAUSE  # note") may
differ; the exit status is 1 when a case not listed does not agree, and
listed cases that now agree are reported (they should leave the list).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, 'tests', 'data', 'upstream')
CASES = [('tp2', 1, False), ('tp2_sp', 1, True), ('dp2_tp2', 2, False), ('dp2_tp2_sp', 2, True)]
ST_DTYPE = {'bf16': ('BF16', 2), 'f16': ('F16', 2), 'f32': ('F32', 4), 'f64': ('F64', 8),
            'i64': ('I64', 8), 'i32': ('I32', 4), 'bool': ('BOOL', 1), 'u8': ('U8', 1),
            'i8': ('I8', 1)}

# A tpx refusal and an upstream one are "both refuse" when they name the same
# cause: tpx's error code -> (upstream's exception type, a text its message
# holds; '{subject}' is the tpx diagnostic's subject). Anything else that
# both refuse is "refuse differently", a difference like any other.
SAME_CAUSE = {
    # Automodel's rewrite of a module tree whose plan-key module owns a
    # submodule's parameters (torch: 'parameter name can't contain "."').
    'style-unsupported-module': ('KeyError', 't contain "."'),
    # transformers 5.25 raises on Automodel's global read of a per-layer
    # head attribute (docs/SEMANTICS.md "Per-layer attributes").
    'upstream-per-layer-config': ('AmbiguousGlobalPerLayerAttributeError',
                                  "'{subject}' is a per-layer attribute"),
}

# tpx refusals of a plan upstream applies, kept on purpose because upstream's
# run then fails (tools/upstream/forward_check.py shows the failure): code ->
# why. Counted as "deliberate", apart from the real differences.
# Verdicts that need no listing: the same plan (agree+flagged: the same
# placements and bytes, and tpx's error diagnostic says the run would fail),
# or the same refusal.
OK_VERDICTS = ('agree', 'agree+flagged', 'both refuse')

DELIBERATE = {
    'qk-norm-whole-width': 'upstream applies colwise q/k under a whole-width q/k norm and its '
                           'first forward fails (forward_check.py olmo2 Olmo2ForCausalLM: '
                           '"The size of tensor a (64) must match the size of tensor b (32)")',
}


KNOWN_HEADER = """\
# Cases where `tpx plan` does not agree today with what NeMo Automodel 0.7.0
# does to transformers 5.25's class (tests/data/upstream/*/golden.json), read
# by tools/upstream/compare.py --ratchet (the meson test upstream-goldens):
# a case that does not agree must be listed here; a listed case that agrees
# is reported so it can leave the list.
# Columns: model_type case cause  # verdict: first difference
# cause (issue 26): 1 tpx plans checkpoint names, not transformers' module
# tree (conversion: fused experts, renames, splits); 2 a persistent buffer
# counted as a parameter; 3 an unmatched plan key is an error in tpx, a
# warning upstream; 4 upstream falls back to its default plan (the
# embed_tokens entry transformers 5 adds); 5 config drift; other;
# deliberate: tpx refuses on purpose what upstream applies and then cannot
# run (compare.py DELIBERATE, proven by forward_check.py), listed last.
# Written by compare.py --write-known (the cause is its heuristic; correct
# it by hand where you know better).
"""


def write_sparse_safetensors(path, tensors):
    """A safetensors file whose data region is a hole: header only on disk."""
    header, off = {'__metadata__': {'format': 'pt'}}, 0
    for name, dtype, shape in tensors:
        st, size = ST_DTYPE[dtype]
        n = size
        for s in shape:
            n *= s
        header[name] = {'dtype': st, 'shape': shape, 'data_offsets': [off, off + n]}
        off += n
    blob = json.dumps(header, separators=(',', ':')).encode()
    blob += b' ' * (-len(blob) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(blob)))
        f.write(blob)
        f.truncate(8 + len(blob) + off)


def run_tpx(tpx, tdir, case_dp, sp):
    cmd = [tpx, 'plan', '--config', os.path.join(tdir, 'config.json'), '--weights', tdir,
           '--tp', '2', '--no-isolation', '--format', 'json']
    if case_dp > 1:
        cmd += ['--dp-shard', str(case_dp)]
    if sp:
        cmd.append('--sp')
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    try:
        return json.loads(p.stdout.decode('utf-8', 'replace')), p
    except ValueError:
        return None, p


def error_parts(report):
    """(code, subject) of tpx's first error diagnostic, or (None, None)."""
    for d in (report or {}).get('diagnostics', []):
        if d.get('level') == 'error':
            return d.get('code'), d.get('subject', '')
    return None, None


def same_cause(refused, report):
    """Whether tpx's refusal names the cause of upstream's (SAME_CAUSE)."""
    code, subject = error_parts(report)
    want = SAME_CAUSE.get(code)
    return bool(want) and refused['type'] == want[0] and \
        want[1].replace('{subject}', subject or '') in refused['message']


def first_error(report, proc):
    if report is None:
        err = proc.stderr.decode('utf-8', 'replace').strip().splitlines()
        return 'exit %d: %s' % (proc.returncode, err[-1] if err else 'no output')
    for d in report.get('diagnostics', []):
        if d.get('level') == 'error':
            return '%s (%s)' % (d.get('code'), d.get('subject', ''))
    return None


def compare_case(golden, report):
    """None when they agree, else the first difference (a string)."""
    big = {d for d, s in zip(report['mesh']['dims'], report['mesh']['sizes']) if s > 1}
    gparams = {p['name']: p for p in golden['parameters']}
    tparams = {p['name']: p for p in report['parameters']}
    up_only = [n for n in gparams if n not in tparams]
    tpx_only = [n for n in tparams if n not in gparams and not tparams[n].get('tied_to')]
    if up_only:
        return 'upstream parameter %s not in tpx (%d such; %d tpx names not upstream%s)' % (
            up_only[0], len(up_only), len(tpx_only), ', first ' + tpx_only[0] if tpx_only else '')
    if tpx_only:
        return 'tpx parameter %s not upstream (%d such)' % (tpx_only[0], len(tpx_only))
    for name, g in gparams.items():
        t = tparams[name]
        if list(t['shape']) != g['shape']:
            return '%s: shape %s vs upstream %s' % (name, t['shape'], g['shape'])
        for dim in sorted(big):
            tp_ = t['placements'].get(dim, 'replicate')
            up = g['placements'].get(dim, 'replicate')
            if tp_ != up:
                return '%s: %s on %s, upstream %s' % (name, tp_, dim, up)
    gbytes = golden['per_rank_param_bytes']
    tbytes = [r['param_bytes'] for r in report['per_rank']]
    if gbytes != tbytes:
        return 'per-rank param bytes %s vs upstream %s' % (tbytes, gbytes)
    return None


def _key_matches(key, names):
    """Whether plan key KEY (dotted atoms, '*' one atom) names a module that
    owns one of the parameter NAMES."""
    atoms = key.split('.')
    for n in names:
        parts = n.split('.')
        if len(parts) > len(atoms) and all(a in ('*', b) for a, b in zip(atoms, parts)):
            return True
    return False


def cause(golden_case, report, verdict, detail):
    """The issue-26 cause category of a difference (a heuristic, for the list):
    1 module tree (checkpoint names vs transformers' converted modules),
    2 a buffer taken for a parameter, 3 an unmatched plan key refused,
    4 upstream fell back to its default plan where tpx did not, other."""
    fell_back = any('Falling back to the default' in w for w in golden_case.get('warnings', []))
    if verdict == 'deliberate':
        return 'deliberate'
    if verdict in ('upstream refuses', 'refuse differently'):
        return 'other'
    names = [p['name'] for p in golden_case.get('parameters', [])]
    bufs = {b[0] for b in golden_case.get('buffers', [])}
    src = (report or {}).get('selection', {}).get('source')
    if verdict == 'tpx refuses':
        code, _, subject = detail.partition(' ')
        subject = subject.strip('()')
        if code == 'unmatched-key':
            keys = [d.get('subject', '') for d in (report or {}).get('diagnostics', [])
                    if d.get('level') == 'error' and d.get('code') == 'unmatched-key'] or [subject]
            return '1' if any(_key_matches(k, names) for k in keys) else '3'
        if fell_back and src in ('hf', 'plugin'):
            return '4'
        return 'other'
    if detail.startswith('tpx parameter '):
        return '2' if detail.split()[2] in bufs else '1'
    if detail.startswith('upstream parameter '):
        return '1'
    if fell_back and src in ('hf', 'plugin'):
        return '4'
    return 'other'


def judge(g, report, proc):
    """(verdict, detail) of one case: golden case G against tpx's REPORT
    (None when tpx printed no JSON; PROC is the finished process)."""
    terr = first_error(report, proc)
    if 'refused' in g:
        uerr = '%s: %s' % (g['refused']['type'], g['refused']['message'].splitlines()[0][:120])
        if not terr:
            return 'upstream refuses', uerr
        if same_cause(g['refused'], report):
            return 'both refuse', uerr
        return 'refuse differently', 'tpx %s; upstream %s' % (terr, uerr)
    code = error_parts(report)[0]
    if terr and code in DELIBERATE:
        # tpx still plans what upstream plans and reports it whole; only its
        # verdict is louder. Same placements and bytes: agree, flagged.
        diff = compare_case(g, report) if report and report.get('parameters') else 'no plan'
        if diff is None:
            return 'agree+flagged', '%s: %s' % (terr, DELIBERATE[code])
        return 'deliberate', '%s: %s (and %s)' % (terr, DELIBERATE[code], diff)
    if terr:
        return 'tpx refuses', terr
    diff = compare_case(g, report)
    return ('agree' if diff is None else 'differ'), diff or ''


def check_type(tpx, model_type, data):
    d = os.path.join(data, model_type)
    with open(os.path.join(d, 'golden.json'), encoding='utf-8') as f:
        golden = json.load(f)
    with open(os.path.join(d, 'recipe.json'), encoding='utf-8') as f:
        recipe = json.load(f)
    out = []
    with tempfile.TemporaryDirectory(prefix='tpx-upstream-') as tdir:
        with open(os.path.join(d, 'config.json'), 'rb') as src, \
                open(os.path.join(tdir, 'config.json'), 'wb') as dst:
            dst.write(src.read())
        write_sparse_safetensors(os.path.join(tdir, 'model.safetensors'), recipe['tensors'])
        for case, dp, sp in CASES:
            g = golden['cases'][case]
            report, proc = run_tpx(tpx, tdir, dp, sp)
            verdict, detail = judge(g, report, proc)
            why = cause(g, report, verdict, detail) if verdict not in OK_VERDICTS else ''
            out.append((case, verdict, detail, why))
    return out


def read_known(path):
    known = {}
    if not os.path.exists(path):
        return known
    with open(path, encoding='utf-8') as f:
        for line in f:
            line = line.split('#', 1)[0].strip()
            if line:
                parts = line.split()
                known[(parts[0], parts[1])] = parts[2] if len(parts) > 2 else 'other'
    return known


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--tpx', required=True)
    ap.add_argument('--data', default=DATA)
    ap.add_argument('--known', default=None)
    ap.add_argument('--ratchet', action='store_true')
    ap.add_argument('--write-known', metavar='FILE',
                    help='write every case that does not agree, with its cause, to FILE')
    ap.add_argument('types', nargs='*')
    a = ap.parse_args()
    known = read_known(a.known or os.path.join(a.data, 'known_differences.txt'))
    types = a.types or sorted(t for t in os.listdir(a.data)
                              if os.path.exists(os.path.join(a.data, t, 'golden.json')))
    counts, new_bad, now_ok, rows, by_cause = {}, [], [], [], {}
    for mt in types:
        for case, verdict, detail, why in check_type(a.tpx, mt, a.data):
            counts[verdict] = counts.get(verdict, 0) + 1
            if why:
                rows.append('%-22s %-11s %-6s # %s: %s' % (mt, case, why, verdict, detail[:110]))
                by_cause[why] = by_cause.get(why, 0) + 1
            listed = (mt, case) in known
            print('%-22s %-11s %-16s %s%s' % (mt, case, verdict, detail,
                                             '  [known: %s]' % known[(mt, case)] if listed else ''))
            if verdict in ('agree', 'agree+flagged') and listed:
                now_ok.append((mt, case))
            elif verdict not in OK_VERDICTS and not listed:
                new_bad.append((mt, case, verdict, detail))
    total = sum(counts.values())
    print('summary: %d cases, %s' % (total, ', '.join('%s %d' % kv for kv in sorted(counts.items()))))
    print('not agreeing, by cause: %s' % ', '.join('%s %d' % kv for kv in sorted(by_cause.items())))
    if a.write_known:
        with open(a.write_known, 'w', encoding='utf-8') as f:
            f.write(KNOWN_HEADER)
            rows.sort(key=lambda r: r.split()[2] == 'deliberate')
            f.write('\n'.join(rows) + '\n' if rows else '')
    for mt, case in now_ok:
        print('NOW AGREES (remove from known_differences.txt): %s %s' % (mt, case))
    for mt, case, verdict, detail in new_bad:
        print('NOT LISTED: %s %s %s %s' % (mt, case, verdict, detail))
    return 1 if a.ratchet and new_bad else 0


if __name__ == '__main__':
    sys.exit(main())
