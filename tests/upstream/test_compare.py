#!/usr/bin/env python3
"""test_compare.py -- the verdicts of tools/upstream/compare.py on made-up
cases (no tpx run, no goldens read): a refusal on both sides is "both
refuse" only for the same named cause (SAME_CAUSE), a tpx refusal of what
upstream applies and cannot run is "deliberate" (DELIBERATE).
Python 3 standard library only (the meson test upstream-compare)."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), 'tools', 'upstream'))
import compare  # noqa: E402

PER_LAYER = ("'head_dim' is a per-layer attribute and may vary across layers. "
             "Access it via the individual layer configs instead")


def report(code=None, subject=''):
    diags = [{'level': 'error', 'code': code, 'subject': subject}] if code else []
    return {'diagnostics': diags, 'mesh': {'dims': ['tp'], 'sizes': [2]},
            'parameters': [], 'per_rank': [{'param_bytes': 0}] * 2}


def refused(kind, message):
    return {'refused': {'type': kind, 'message': message}}


class Verdicts(unittest.TestCase):
    def test_same_named_cause(self):
        v, _ = compare.judge(refused('AmbiguousGlobalPerLayerAttributeError', PER_LAYER),
                             report('upstream-per-layer-config', 'head_dim'), None)
        self.assertEqual(v, 'both refuse')

    def test_other_attribute_is_another_cause(self):
        v, d = compare.judge(refused('AmbiguousGlobalPerLayerAttributeError', PER_LAYER),
                             report('upstream-per-layer-config', 'num_attention_heads'), None)
        self.assertEqual(v, 'refuse differently')
        self.assertIn('upstream-per-layer-config', d)

    def test_unrelated_refusals_differ(self):
        v, _ = compare.judge(refused('ValueError', 'num_key_value_heads (3) must be divisible'),
                             report('upstream-per-layer-config', 'head_dim'), None)
        self.assertEqual(v, 'refuse differently')

    def test_key_error_dot(self):
        v, _ = compare.judge(refused('KeyError', '\'parameter name can\\\'t contain "."\''),
                             report('style-unsupported-module', 'x.y'), None)
        self.assertEqual(v, 'both refuse')

    def test_only_upstream_refuses(self):
        v, _ = compare.judge(refused('AmbiguousGlobalPerLayerAttributeError', PER_LAYER),
                             report(), None)
        self.assertEqual(v, 'upstream refuses')

    def test_deliberate(self):
        g = {'parameters': [], 'per_rank_param_bytes': [0, 0]}
        v, d = compare.judge(g, report('qk-norm-whole-width', 'model.layers.*.self_attn.k_norm'),
                             None)
        self.assertEqual(v, 'deliberate')
        self.assertIn('forward_check.py', d)
        self.assertEqual(compare.cause(g, None, v, d), 'deliberate')
        v, _ = compare.judge(g, report('unmatched-key', 'model.x'), None)
        self.assertEqual(v, 'tpx refuses')


if __name__ == '__main__':
    unittest.main()
