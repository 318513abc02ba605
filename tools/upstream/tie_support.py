#!/usr/bin/env python3
"""tie_support.py -- the tie_word_embeddings policy of each class the
automodel_moe plugin serves.

NeMo Automodel 0.7.0's own model classes declare which tie_word_embeddings
settings they accept (the class attribute tie_word_embeddings_support:
both, untied_only, tied_only; absent means both) and refuse the other at
construction. This prints it for every architecture of
plugins/automodel_moe/am_config.c (its am_arch.tie_support field is copied
from this output; see docs/MOE_FAMILIES.md). Needs the stack of
tools/upstream/README.md:

    /work/upstream-venv/bin/python tools/upstream/tie_support.py
"""
import logging
import warnings

warnings.filterwarnings('ignore')
logging.disable(logging.WARNING)

from nemo_automodel._transformers.registry import ModelRegistry  # noqa: E402

# The rows of plugins/automodel_moe/am_config.c, in its order.
ARCHS = [
    'DeepseekV3ForCausalLM', 'DeepseekV32ForCausalLM', 'Qwen3MoeForCausalLM',
    'Qwen3NextForCausalLM', 'Glm4MoeForCausalLM', 'Glm4MoeLiteForCausalLM',
    'GlmMoeDsaForCausalLM', 'GptOssForCausalLM', 'MiniMaxM2ForCausalLM',
    'Ernie4_5_MoeForCausalLM', 'BailingMoeV2ForCausalLM', 'LagunaForCausalLM',
    'MiMoV2FlashForCausalLM', 'MiMoV2ForCausalLM', 'MiMoV25ForCausalLM',
    'HYV3ForCausalLM', 'Mistral4ForCausalLM',
    'Qwen3OmniMoeForConditionalGeneration',
    'KimiK25VLForConditionalGeneration', 'KimiK25ForConditionalGeneration',
    'MiniMaxM3SparseForConditionalGeneration', 'InklingForConditionalGeneration',
    'Step3p7ForConditionalGeneration', 'Step3p6ForConditionalGeneration',
    'Glm5NextForConditionalGeneration',
]


def main():
    for arch in ARCHS:
        cls = ModelRegistry.get_model_cls_from_model_arch(arch)
        support = getattr(cls, 'tie_word_embeddings_support', None)
        value = support.value if support is not None else 'both (undeclared)'
        print('%-40s %-28s %s' % (arch, cls.__name__, value))


if __name__ == '__main__':
    main()
