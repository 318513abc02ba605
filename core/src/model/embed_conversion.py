#!/usr/bin/env python3
"""embed_conversion.py CONVERSION.json BUFFERS.json OUT.c -- embed the
transformers checkpoint-conversion rules (hf_conversion/conversion.json) and
the saved buffers (hf_conversion/buffers.json) into libtpx as one compact
JSON string literal per model type, so an installed tpx reads no data file.
Standard library only; the output is deterministic.

Per model type (text_decoders of conversion.json) the literal is
  {"r": [rule...], "b": [buffer pattern...]}
with a rule {"c": 0 rename | 1 converter, "s": [[ERE, lookahead]...],
"g": [source index...], "t": [target...], "ops": [[op, dim]...]}:
  - "s": each source as a POSIX extended regex, in the order transformers
    tries them (its alternation puts the longest pattern first), with the
    trailing negative lookahead transformers appends ("(?!\\w)", "(?!_)")
    moved out: "w" or "_" (the character after a match must not be a word
    character / an underscore), "" for none. A converter's '*' (one expert or
    layer index) becomes the group "([0-9]+)".
  - "g": the source's index in the rule as written (for MergeModulelist /
    Concatenate order).
  - "z" (a Split only): each target's size along the split dim, from
    hf_tables.py's "split_sizes": [[coef, config attribute, ...], ...] (a
    sum of products of config attributes) or "rest" (the source's size less
    the other targets').
Rules this build cannot apply (kinds other than WeightRenaming /
PrefixChange / WeightConverter, converters with operations other than
MergeModulelist / Concatenate / Chunk / Split, a Split whose sizes
hf_tables.py could not express) are left out and counted in "x".
"b": the module-side names of the persistent buffers save_pretrained
writes, with every all-digit atom replaced by '*' (deduplicated)."""
import json
import re
import sys

SUPPORTED_OPS = {'MergeModulelist', 'Concatenate', 'Chunk', 'Split'}


def c_string(text):
    out = []
    for ch in text:
        if ch in '\\"':
            out.append('\\' + ch)
        elif 32 <= ord(ch) < 127:
            out.append(ch)
        else:
            out.extend('\\%03o' % b for b in ch.encode('utf-8'))
    return '"' + ''.join(out) + '"'


def split_regex(regex):
    """'(?P<g0>A)|(?P<g1>B)' -> [(0, 'A'), (1, 'B')] in the written order."""
    parts = re.split(r'\|(?=\(\?P<g\d+>)', regex)
    out = []
    for p in parts:
        m = re.fullmatch(r'\(\?P<g(\d+)>(.*)\)', p, re.S)
        if not m:
            raise SystemExit('unexpected regex piece %r' % p)
        out.append((int(m.group(1)), m.group(2)))
    return out


def to_ere(piece, converter):
    look = ''
    for tail, code in (('(?!\\w)', 'w'), ('(?!_)', '_')):
        if piece.endswith(tail):
            piece, look = piece[:-len(tail)], code
    if converter:
        # transformers turns a converter's '*' into '.*\.' (an index)
        piece = piece.replace('.*\\.', '([0-9]+)\\.')
    piece = piece.replace('\\d', '[0-9]').replace('\\w', '[A-Za-z0-9_]')
    if '(?' in piece:
        raise SystemExit('unsupported regex syntax in %r' % piece)
    # an unescaped '.' of a plain pattern matches any character, as in Python
    return [piece, look]


def target_of(rule, i):
    t = rule.get('target_processed') or rule['target']
    return t[i].replace('\\.', '.')


def compact_rule(rule):
    kind = rule['kind']
    ops = rule.get('operations') or []
    if kind in ('WeightRenaming', 'PrefixChange'):
        conv = 0
    elif kind == 'WeightConverter' and ops and all(o['op'] in SUPPORTED_OPS
                                                  for o in ops):
        conv = 1
    else:
        return None
    split = any(o['op'] == 'Split' for o in ops)
    if split and not rule.get('split_sizes'):
        return None
    pieces = split_regex(rule['regex'])
    out = {
        'c': conv,
        's': [to_ere(p, conv) for _, p in pieces],
        'g': [g for g, _ in pieces],
        't': [target_of(rule, i) for i in range(len(rule['target']))],
        'ops': [[o['op'], o.get('dim', 0)] for o in ops],
    }
    if split:
        out['z'] = rule['split_sizes']
    return out


def buffer_patterns(entries):
    out = []
    for b in entries or []:
        if not b.get('persistent') or not b.get('saved_as'):
            continue
        pat = '.'.join('*' if a.isdigit() else a for a in b['name'].split('.'))
        if pat not in out:
            out.append(pat)
    return out


def main():
    conv_path, buf_path, out_path = sys.argv[1:4]
    with open(conv_path, encoding='utf-8') as f:
        conv = json.load(f)
    with open(buf_path, encoding='utf-8') as f:
        bufs = json.load(f)
    version = conv['transformers_version']
    if bufs['transformers_version'] != version:
        raise SystemExit('conversion.json and buffers.json disagree on the '
                         'transformers version')
    rows = []
    for mtype in sorted(set(conv['text_decoders']) | set(bufs['buffers'])):
        entry = conv['text_decoders'].get(mtype, {})
        rules, skipped = [], 0
        for r in entry.get('rules') or []:
            c = compact_rule(r)
            if c is None:
                skipped += 1
            else:
                rules.append(c)
        b = buffer_patterns(bufs['buffers'].get(mtype))
        if not rules and not b and not skipped:
            continue
        rows.append((mtype, json.dumps({'r': rules, 'b': b, 'x': skipped},
                                       separators=(',', ':'))))
    with open(out_path, 'w', encoding='utf-8') as f:
        f.write('/* Generated by core/src/model/embed_conversion.py from\n'
                ' * core/src/model/hf_conversion/{conversion,buffers}.json. '
                'Do not edit. */\n')
        f.write('#include <stddef.h>\n\n#include "model/conversion.h"\n\n')
        f.write('const char tpx__conv_version[] = %s;\n\n' % c_string(version))
        f.write('const tpx__conv_entry tpx__conv_entries[] = {\n')
        for name, text in rows:
            f.write('    {%s,\n     %s},\n' % (c_string(name), c_string(text)))
        f.write('};\n\nconst size_t tpx__conv_num_entries = %d;\n' % len(rows))


if __name__ == '__main__':
    main()
