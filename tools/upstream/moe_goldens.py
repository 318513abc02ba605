#!/usr/bin/env python3
"""moe_goldens.py -- record what NeMo Automodel 0.7.0 does to the MoE models
it serves through its OWN classes (MODEL_ARCH_MAPPING), as goldens for
issue 27 (expert parallelism).

Pinned stack (README.md here): transformers 5.25.0, nemo-automodel 0.7.0
(installed --no-deps), torch 2.15.0; CPU only, nothing is downloaded.
Regenerate:  /work/upstream-venv/bin/python tools/upstream/moe_goldens.py [FAMILY...]
(writes tests/data/upstream_moe/<family>/ and tests/data/upstream_moe/INDEX.json).

Per family (FAMILIES below: the transformers model_type and the architecture
name Automodel maps to its own class):
  config.json    a tiny HF config (tiny.tiny_config's shrinking, then 8
                 routed experts, 2 per token, 3 layers with the first dense
                 where the family has first-dense layers), as
                 PretrainedConfig.to_json_string(use_diff=False) writes it
  golden.json    per case (world 4: dp_shard 4 with ep 1, 2, 4; refusals:
                 ep 3, ep 8 (does not divide the world), tp 2 with ep 1 and
                 ep 2, and ep 4 with 6 experts): Automodel's own class built
                 the way its loader builds it (model_init: model_cls(hf_config)
                 under local_torch_dtype(bf16), here on the meta device), the
                 meshes of MeshContext.build(FSDP2Config(), ParallelismSizes)
                 (_create_fsdp2_device_mesh; with ep > 1 _create_moe_mesh),
                 then the recipe's entry, model_parallelizer.parallelize_model
                 (ep > 1: components/moe/parallelizer.parallelize_model; ep 1:
                 the generic FSDP2 path), under torch.distributed's "fake"
                 backend, once per rank: each parameter's FQN (Automodel's
                 names), global shape, dtype, the mesh it lives on ("main" or
                 "moe") with placements by mesh dim, each rank's local shape;
                 per-rank parameter bytes; the FSDP units ([module FQN, the
                 mesh dims it shards over, how many parameters it holds]);
                 both meshes' rank layout and each rank's coordinates; tied
                 aliases (alias -> FQN kept); the buffers ([FQN, shape,
                 dtype, persistent]); or the refusal (type, message, where).
  hf_names.json  the family's state-dict adapter: for every Automodel
                 parameter, the HF checkpoint tensors it is made of
                 (adapter.to_hf on the model's state dict of meta tensors,
                 one Automodel key at a time), and the full HF key list.
Shims: as goldens.py, a no-op FSDPParam.to_accumulated_grad_if_needed
(torch 2.15 lacks it; Automodel patches it unconditionally); and, on a
machine without CUDA, torch.cuda.current_device() answers 0 (four families
name cuda:<current device> for their rotary embedding, which only stores it).
"""
import contextlib
import io
import json
import logging
import os
import sys
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, 'tests', 'data', 'upstream_moe')
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402
from torch.distributed.fsdp._fully_shard._fsdp_param import FSDPParam  # noqa: E402

if not hasattr(FSDPParam, 'to_accumulated_grad_if_needed'):
    FSDPParam.to_accumulated_grad_if_needed = lambda self: None
if not torch.cuda.is_available():
    # Qwen3-MoE, GLM-4-MoE, GPT-OSS, Qwen3-Next build their rotary embedding
    # with device=cuda:{torch.cuda.current_device()}, which raises without a
    # driver; the device is only stored (the tables are made at forward).
    torch.cuda.current_device = lambda: 0

from nemo_automodel._transformers.registry import ModelRegistry  # noqa: E402
from nemo_automodel.components.distributed.config import FSDP2Config  # noqa: E402
from nemo_automodel.components.distributed.mesh import MeshContext, ParallelismSizes  # noqa: E402
from nemo_automodel.components.distributed.model_parallelizer import parallelize_model  # noqa: E402
import goldens  # noqa: E402  (versions, placement_str, render, dump, DTYPES, Capture)
import tiny  # noqa: E402

WORLD = 4
# family -> (transformers model_type, architecture in MODEL_ARCH_MAPPING)
FAMILIES = {
    'deepseek_v3': ('deepseek_v3', 'DeepseekV3ForCausalLM'),
    'qwen3_moe': ('qwen3_moe', 'Qwen3MoeForCausalLM'),
    'glm4_moe': ('glm4_moe', 'Glm4MoeForCausalLM'),
    'gpt_oss': ('gpt_oss', 'GptOssForCausalLM'),
    'glm4_moe_lite': ('glm4_moe_lite', 'Glm4MoeLiteForCausalLM'),
    'qwen3_next': ('qwen3_next', 'Qwen3NextForCausalLM'),
    'minimax_m2': ('minimax_m2', 'MiniMaxM2ForCausalLM'),
    'ernie4_5_moe': ('ernie4_5_moe', 'Ernie4_5_MoeForCausalLM'),
    'deepseek_v32': ('deepseek_v32', 'DeepseekV32ForCausalLM'),
    'glm_moe_dsa': ('glm_moe_dsa', 'GlmMoeDsaForCausalLM'),
    'qwen3_5_moe_text': ('qwen3_5_moe_text', 'Qwen3_5MoeForCausalLM'),
    'kimi_linear': ('kimi_linear', 'KimiLinear48BForCausalLM'),
    # Automodel's own config class (registered with AutoConfig on import)
    'ling_v2': ('bailing_moe', 'BailingMoeV2ForCausalLM'),
    'laguna': ('laguna', 'LagunaForCausalLM'),
    'mimo_v2_flash': ('mimo_v2_flash', 'MiMoV2FlashForCausalLM'),
    'mimo_v2': ('mimo_v2', 'MiMoV2ForCausalLM'),
    'mimo_v25': ('mimo_v2', 'MiMoV25ForCausalLM'),
    'hy_v3': ('hy_v3', 'HYV3ForCausalLM'),
    'mistral4': ('mistral4', 'Mistral4ForCausalLM'),
    'step3p5': ('step3p5', 'Step3p5ForCausalLM'),
    'deepseek_v4': ('deepseek_v4', 'DeepseekV4ForCausalLM'),
    'deepseek_v41': ('deepseek_v41', 'DeepseekV41ForCausalLM'),
    'kimi_k3': ('kimi_k3', 'KimiK3ForCausalLM'),
    # multimodal classes (COMPOSITE below says how their configs are built)
    'qwen3_vl_moe': ('qwen3_vl_moe', 'Qwen3VLMoeForConditionalGeneration'),
    'qwen3_omni_moe': ('qwen3_omni_moe', 'Qwen3OmniMoeForConditionalGeneration'),
    'kimi_k25_vl': ('kimi_k25', 'KimiK25VLForConditionalGeneration'),
    'qwen3_8_flash_next': ('qwen3_8_flash_next', 'Qwen3_8_FlashNextForConditionalGeneration'),
    'qwen4_exp': ('qwen3_8_flash_next', 'Qwen4ExpForConditionalGeneration'),
    'kimi_k3_vl': ('kimi_k3', 'KimiK3ForConditionalGeneration'),
    'minimax_m3_vl': ('minimax_m3_vl', 'MiniMaxM3SparseForConditionalGeneration'),
    'inkling': ('inkling_mm_model', 'InklingForConditionalGeneration'),
    'step3p7': ('step3p7', 'Step3p7ForConditionalGeneration'),
    'step3p6': ('step3p7', 'Step3p6ForConditionalGeneration'),
    'glm5_next': ('glm5_next', 'Glm5NextForConditionalGeneration'),
}
# Composite (multimodal) configs: the text config is shrunk as its own model
# type (tiny_moe_config), set at `text_at` (a path of attributes), and the
# vision / audio sub-configs at the paths of `shrink` get the small sizes.
VISION = {'depth': 2, 'hidden_size': 64, 'intermediate_size': 128, 'num_heads': 4,
          'out_hidden_size': 64, 'num_position_embeddings': 64,
          'deepstack_visual_indexes': [0, 1]}
COMPOSITE = {
    'qwen3_vl_moe': {'text_type': 'qwen3_vl_moe_text', 'text_at': ('text_config',),
                     'shrink': {('vision_config',): VISION}},
    'qwen3_omni_moe': {
        'text_type': 'qwen3_omni_moe_text', 'text_at': ('thinker_config', 'text_config'),
        'shrink': {('thinker_config', 'vision_config'): VISION,
                   ('thinker_config', 'audio_config'): {
                       'encoder_layers': 2, 'encoder_attention_heads': 4, 'encoder_ffn_dim': 128,
                       'd_model': 64, 'output_dim': 64, 'downsample_hidden_size': 32,
                       'num_mel_bins': 32}}},
    # Automodel's own KimiK25VLConfig: a DeepSeek-V3 text config and MoonViT
    'kimi_k25': {
        'config': ('nemo_automodel.components.models.kimi_k25_vl.model', 'KimiK25VLConfig'),
        'text_type': 'deepseek_v3', 'text_at': ('text_config',),
        'top': {'mm_hidden_size': 64},
        'shrink': {('vision_config',): {'num_hidden_layers': 2, 'num_attention_heads': 4,
                                        'hidden_size': 64, 'intermediate_size': 128,
                                        'init_pos_emb_height': 8, 'init_pos_emb_width': 8}}},
    # Automodel's own config classes built from keyword arguments (their
    # sub-configs derive fields at construction): `kwargs` as given, the
    # routed-expert count at `experts_at`
    'minimax_m3_vl': {
        'config': ('nemo_automodel.components.models.minimax_m3_vl.config', 'MiniMaxM3VLConfig'),
        'experts_at': ('text_config', 'num_local_experts'), 'dense_first': True,
        'kwargs': {
            'projector_hidden_size': 96,
            'text_config': {
                'hidden_size': 64, 'intermediate_size': 32, 'dense_intermediate_size': 96,
                'shared_intermediate_size': 48, 'num_hidden_layers': 3,
                'num_attention_heads': 4, 'num_key_value_heads': 2, 'head_dim': 16,
                'rotary_dim': 8, 'vocab_size': 128, 'num_experts_per_tok': 2,
                'moe_layer_freq': [0, 1, 1], 'num_mtp_modules': 1,
                'sparse_attention_config': {
                    'sparse_attention_freq': [0, 1, 1], 'sparse_num_index_heads': 2,
                    'sparse_index_dim': 16, 'sparse_block_size': 16, 'sparse_topk_blocks': 2}},
            'vision_config': {'hidden_size': 64, 'num_attention_heads': 4, 'num_hidden_layers': 2,
                              'intermediate_size': 128, 'projection_dim': 64, 'image_size': 56}}},
    # layer 0 dense, 1 sliding-window (its own head counts), 2 full
    'inkling_mm_model': {
        'config': ('nemo_automodel.components.models.inkling.configuration', 'InklingConfig'),
        'experts_at': ('text_config', 'n_routed_experts'), 'dense_first': True,
        'kwargs': {
            'text_config': {
                'hidden_size': 64, 'num_hidden_layers': 3, 'num_attention_heads': 4,
                'num_key_value_heads': 2, 'head_dim': 16, 'swa_num_attention_heads': 8,
                'swa_num_key_value_heads': 4, 'swa_head_dim': 8, 'local_layer_ids': [1],
                'd_rel': 8, 'rel_extent': 64, 'vocab_size': 128, 'intermediate_size': 96,
                'moe_intermediate_size': 32, 'num_experts_per_tok': 2, 'n_shared_experts': 2,
                'dense_mlp_idx': 1},
            'vision_config': {'hidden_size': 64, 'num_hidden_layers': 2,
                              'num_attention_heads': 4, 'patch_size': 8},
            'audio_config': {'n_mel_bins': 8, 'mel_vocab_size': 16}}},
    # layer 0 dense and full, 1 MoE sliding (its own head counts), 2 MoE
    # full; one MTP layer
    'step3p7': {
        'config': ('nemo_automodel.components.models.step3p7.configuration_step3p7',
                   'Step3p7Config'),
        'experts_at': ('text_config', 'moe_num_experts'), 'dense_first': True,
        'kwargs': {
            'text_config': {
                'hidden_size': 64, 'num_hidden_layers': 3, 'num_attention_heads': 4,
                'num_attention_groups': 2, 'head_dim': 16, 'vocab_size': 128,
                'intermediate_size': 96, 'moe_intermediate_size': 32, 'moe_top_k': 2,
                'share_expert_dim': 48, 'moe_layers_enum': [1, 2],
                'num_nextn_predict_layers': 1, 'sliding_window': 16,
                'layer_types': ['full_attention', 'sliding_attention', 'full_attention',
                                'sliding_attention'],
                'attention_other_setting': {'num_attention_heads': 8,
                                            'num_attention_groups': 4}},
            'vision_config': {'width': 64, 'layers': 2, 'heads': 4, 'image_size': 56,
                              'patch_size': 14}}},
    # layer 0 dense linear attention, 1 MoE DSA (full indexer), 2 MoE DSA
    # (shared indexer); one MTP layer
    'glm5_next': {
        'config': ('nemo_automodel.components.models.glm5_next.config', 'Glm5NextConfig'),
        'experts_at': ('text_config', 'n_routed_experts'), 'dense_first': True,
        'kwargs': {
            'text_config': {
                'hidden_size': 64, 'num_hidden_layers': 3, 'num_attention_heads': 4,
                'num_key_value_heads': 4, 'vocab_size': 128, 'pad_token_id': 0,
                'intermediate_size': 96, 'moe_intermediate_size': 32, 'num_experts_per_tok': 2,
                'n_shared_experts': 1, 'kv_lora_rank': 16, 'q_lora_rank': 32,
                'qk_nope_head_dim': 16, 'v_head_dim': 16, 'index_head_dim': 16,
                'index_n_heads': 2, 'index_topk': 16, 'index_kpool': 4,
                'linear_head_dim': 16, 'linear_num_heads': 4,
                'mlp_layer_types': ['dense', 'sparse', 'sparse'],
                'layer_types': ['linear_attention', 'deepseek_sparse_attention',
                                'deepseek_sparse_attention'],
                'indexer_types': ['full', 'full', 'shared']},
            'vision_config': {'depth': 2, 'hidden_size': 64, 'num_heads': 4,
                              'out_hidden_size': 64, 'intermediate_size': 128,
                              'projection_intermediate_size': 96}}},
}
# Why a family cannot be recorded with the pinned stack, beyond upstream's
# own error (written to INDEX.json as `note`).
NOTES = {
    'qwen3_5_moe_text': "Automodel 0.7.0's class imports a name transformers 5.25 renamed "
                        "(Qwen3_5MoeBaseModelOutputWithPast); MODEL_ARCH_MAPPING drops an entry "
                        "whose import fails, so upstream serves the architecture with "
                        "transformers' class (the HF path)",
    'kimi_linear': 'needs the fla (flash-linear-attention) extra, a GPU kernel package',
    'kimi_k3': 'needs the fla (flash-linear-attention) extra, a GPU kernel package',
    'step3p5': "transformers 5.25 reads model_type step3p5 with Step3p7TextConfig, which "
               "moves rope_theta into rope_parameters; Automodel 0.7.0's Step3p5 class reads "
               "config.rope_theta, so no Step-3.5 config builds with the pinned stack",
    'deepseek_v4': "the module imports PIL (its image processor), absent here (nemo-automodel "
                   "installed --no-deps); its registry entry carries hf_parallelizer (not the "
                   "MoE parallelizer), and tpx serves it with plugin deepseek",
    'deepseek_v41': 'the module imports PIL (absent here); with PIL its config still needs the '
                    'Engram tokenizer from a checkpoint, which a tiny config has not',
    'qwen3_vl_moe': "Automodel 0.7.0's class imports a name transformers 5.25 removed "
                    "(Qwen3VLMoeModelOutputWithPast); MODEL_ARCH_MAPPING drops an entry whose "
                    "import fails, so upstream serves the architecture with transformers' class "
                    "(the HF path)",
    'qwen3_8_flash_next': "Automodel 0.7.0's module imports a name transformers 5.25 removed "
                          "(Qwen3_5MoeModelOutputWithPast); MODEL_ARCH_MAPPING drops an entry "
                          "whose import fails",
    'kimi_k3_vl': 'needs the fla (flash-linear-attention) extra, a GPU kernel package',
    'qwen4_exp': "mapped to Automodel's Qwen3_8_FlashNext class, whose module imports a name "
                 "transformers 5.25 removed (Qwen3_5MoeModelOutputWithPast); "
                 "MODEL_ARCH_MAPPING drops an entry whose import fails",
}
EXPERTS = 8
# case -> (dp_shard, tp, ep, experts)
CASES = {
    'dp4_ep1': (4, 1, 1, EXPERTS),
    'dp4_ep2': (4, 1, 2, EXPERTS),
    'dp4_ep4': (4, 1, 4, EXPERTS),
    'dp4_ep3': (4, 1, 3, EXPERTS),        # ep does not divide the world
    'dp4_ep8': (4, 1, 8, EXPERTS),        # ep larger than the world
    'dp4_ep4_e6': (4, 1, 4, 6),           # ep does not divide the experts
    'dp2_tp2_ep1': (2, 2, 1, EXPERTS),    # tp on a custom MoE model
    'dp2_tp2_ep2': (2, 2, 2, EXPERTS),
}
EXPERT_KEYS = ('n_routed_experts', 'num_local_experts', 'num_experts', 'moe_num_experts')


def composite_config(model_type, arch, experts):
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    spec = COMPOSITE[model_type]
    import importlib
    if 'kwargs' in spec:
        kw = json.loads(json.dumps(spec['kwargs']))
        kw[spec['experts_at'][0]][spec['experts_at'][1]] = experts
        cfg = getattr(importlib.import_module(spec['config'][0]), spec['config'][1])(**kw)
        cfg.architectures = [arch]
        cfg.dtype = torch.bfloat16
        return cfg, spec['dense_first']
    text, dense_first = tiny_moe_config(spec['text_type'], arch, experts)
    if 'config' in spec:
        cfg = getattr(importlib.import_module(spec['config'][0]), spec['config'][1])()
    else:
        cfg = CONFIG_MAPPING[model_type]()
    for k, v in spec.get('top', {}).items():
        setattr(cfg, k, v)
    for path, sizes in spec['shrink'].items():
        sub = cfg
        for name in path:
            sub = getattr(sub, name)
        for k, v in sizes.items():
            setattr(sub, k, v)
    parent = cfg
    for name in spec['text_at'][:-1]:
        parent = getattr(parent, name)
    setattr(parent, spec['text_at'][-1], text)
    cfg.architectures = [arch]
    cfg.dtype = torch.bfloat16
    return cfg, dense_first


def tiny_moe_config(model_type, arch, experts=EXPERTS):
    if model_type in COMPOSITE:
        return composite_config(model_type, arch, experts)
    cfg = tiny.tiny_config(model_type)
    d = cfg.to_dict()
    for k in EXPERT_KEYS:
        if isinstance(d.get(k), int):
            setattr(cfg, k, experts)
    dense_first = False
    for k in ('first_k_dense_replace', 'first_dense_layers', 'num_dense_layers',
              'moe_layer_start_index'):
        if isinstance(d.get(k), int):
            setattr(cfg, k, 1)
            dense_first = True
    n = 3
    old = d.get('num_hidden_layers')
    cfg.num_hidden_layers = n
    if isinstance(d.get('moe_layer_end_index'), int):
        cfg.moe_layer_end_index = n - 1       # ernie4_5_moe: MoE in layers 1..2
    for k, v in d.items():
        if isinstance(v, list) and isinstance(old, int) and len(v) == old and v:
            setattr(cfg, k, (v * n)[:n] if len(v) < n else v[:n])
        if isinstance(v, list) and v and set(v) <= {'dense', 'sparse'}:
            setattr(cfg, k, ['dense'] + ['sparse'] * (n - 1))  # glm_moe_dsa's mlp_layer_types
            dense_first = True
    if model_type == 'qwen3_next':
        cfg.layer_types = ['linear_attention', 'linear_attention', 'full_attention']
    if model_type == 'gpt_oss':
        cfg.layer_types = ['sliding_attention', 'full_attention', 'sliding_attention']
    if model_type in ('mimo_v2_flash', 'mimo_v2'):
        # the sliding-window layers' own sizes (tiny.py leaves them at the
        # class defaults); layer 0 dense and full, 1 MoE sliding, 2 MoE full;
        # head_dim 24 keeps partial_rotary_factor 0.334's rotary dims even
        cfg.swa_num_attention_heads, cfg.swa_num_key_value_heads = 8, 2
        cfg.swa_head_dim, cfg.swa_v_head_dim = 24, 16
        cfg.head_dim, cfg.v_head_dim = 24, 8
        cfg.moe_layer_freq = [0, 1, 1]
        cfg.hybrid_layer_pattern = [0, 1, 0]
        cfg.layer_types = ['full_attention', 'sliding_attention', 'full_attention']
        dense_first = True
    cfg.architectures = [arch]
    cfg.dtype = torch.bfloat16
    return cfg, dense_first


def build(arch, cfg):
    """As model_init.__init_model's custom path: model_cls(hf_config) under
    local_torch_dtype(bf16); here on the meta device."""
    from nemo_automodel._transformers.model_init import local_torch_dtype
    cls = ModelRegistry.resolve_custom_model_cls(arch, cfg)
    if cls is None:  # the registry's lazy import failed quietly: say why
        import importlib
        from nemo_automodel._transformers.registry import MODEL_ARCH_MAPPING
        importlib.import_module(MODEL_ARCH_MAPPING[arch][0])
        raise LookupError('no Automodel class for %s' % arch)
    with torch.device('meta'), local_torch_dtype(torch.bfloat16, cls.__name__):
        return cls(cfg)


def mesh_layout(mesh):
    if mesh is None:
        return None
    return {'dims': [str(getattr(d, 'value', d)) for d in mesh.mesh_dim_names],
            'sizes': list(mesh.mesh.shape), 'ranks': mesh.mesh.tolist()}


def fsdp_units(model):
    units = []
    for name, mod in model.named_modules():
        if not hasattr(mod, '_get_fsdp_state'):
            continue
        try:
            state = mod._get_fsdp_state()
        except Exception:  # noqa: BLE001
            continue
        pg = state._fsdp_param_group
        if pg is None:
            continue
        mesh = pg.mesh_info.mesh
        units.append([name, [str(getattr(d, 'value', d)) for d in mesh.mesh_dim_names],
                      len(pg.fsdp_params)])
    return units


def one_rank(arch, cfg, rank, dp, tp, ep):
    dist.init_process_group('fake', store=FakeStore(), rank=rank, world_size=WORLD)
    try:
        model = build(arch, cfg)
        ctx = MeshContext.build(FSDP2Config(), ParallelismSizes(dp_size=dp, tp_size=tp, ep_size=ep),
                                world_size=WORLD)
        main, moe = ctx.device_mesh, ctx.moe_mesh
        model = parallelize_model(model, ctx)
        params, seen, tied = [], {}, {}
        for name, p in model.named_parameters(remove_duplicate=False):
            if id(p) in seen:
                tied[name] = seen[id(p)]
                continue
            seen[id(p)] = name
            if hasattr(p, 'placements'):
                m = p.device_mesh
                dims = [str(getattr(d, 'value', d)) for d in m.mesh_dim_names]
                which = 'moe' if 'ep' in dims or 'ep_shard' in dims else 'main'
                pls = dict(zip(dims, (goldens.placement_str(x) for x in p.placements)))
                local = list(p.to_local().shape)
            else:
                which, pls, local = None, {}, list(p.shape)
            params.append([name, list(p.shape), goldens.DTYPES.get(p.dtype, str(p.dtype)), which,
                           pls, local, p.element_size()])
        bufs = []
        for mod_name, mod in model.named_modules():
            for bname, b in mod.named_buffers(recurse=False):
                if b is not None:
                    bufs.append([mod_name + '.' + bname if mod_name else bname, list(b.shape),
                                 goldens.DTYPES.get(b.dtype, str(b.dtype)),
                                 bname not in mod._non_persistent_buffers_set])
        params.append(bufs)
        params.append(tied)
        coords = {'main': main.get_coordinate(),
                  'moe': moe.get_coordinate() if moe is not None else None}
        return params, fsdp_units(model), mesh_layout(main), mesh_layout(moe), coords
    finally:
        dist.destroy_process_group()


def run_case(arch, cfg, dp, tp, ep):
    cap = goldens.Capture()
    logging.getLogger().addHandler(cap)
    ranks = []
    try:
        with warnings.catch_warnings(record=True), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter('always')
            for rank in range(WORLD):
                try:
                    ranks.append(one_rank(arch, cfg, rank, dp, tp, ep))
                except Exception as e:  # noqa: BLE001 - an upstream refusal is data
                    tb = traceback.extract_tb(e.__traceback__)[-1]
                    return {'refused': {'type': type(e).__name__, 'message': str(e)[:600],
                                        'where': '%s:%d' % (os.path.basename(tb.filename), tb.lineno),
                                        'rank': rank}}
    finally:
        logging.getLogger().removeHandler(cap)
    tied, buffers = ranks[0][0][-1], ranks[0][0][-2]
    for r in ranks:
        del r[0][-2:]
    params = []
    for i, (name, shape, dtype, which, pls, _, _) in enumerate(ranks[0][0]):
        params.append({'name': name, 'shape': shape, 'dtype': dtype, 'mesh': which,
                       'placements': pls, 'local_shapes': [r[0][i][5] for r in ranks]})
    return {'main_mesh': ranks[0][2], 'moe_mesh': ranks[0][3],
            'coordinates': [r[4] for r in ranks],
            'parameters': params,
            'per_rank_param_bytes': [sum(goldens._numel(p[5]) * p[6] for p in r[0]) for r in ranks],
            'tied': tied, 'fsdp_units': ranks[0][1], 'buffers': buffers,
            'warnings': [w[:400] for w in cap.lines if 'deprecated' not in w]}


def hf_names(arch, cfg):
    model = build(arch, cfg)
    adapter = getattr(model, 'state_dict_adapter', None)
    if adapter is None:
        return {'adapter': None}
    sd = model.state_dict()
    table = {}
    for k, v in sd.items():
        try:
            out = adapter.to_hf({k: v})
            table[k] = sorted(out)
        except Exception as e:  # noqa: BLE001
            table[k] = {'error': '%s: %s' % (type(e).__name__, str(e)[:200])}
    try:
        full = adapter.to_hf(dict(sd))
        full = [[n, goldens.DTYPES.get(t.dtype, str(t.dtype)), list(t.shape)] for n, t in full.items()]
    except Exception as e:  # noqa: BLE001
        full = {'error': '%s: %s' % (type(e).__name__, str(e)[:300])}
    return {'adapter': type(adapter).__name__, 'to_hf': table, 'hf_tensors': full}


def dense_refusal():
    """A dense model (transformers' LlamaForCausalLM, the generic path)
    with ep 2: the MoE parallelizer finds no moe_config."""
    cfg = tiny.tiny_config('llama')
    cfg.architectures = ['LlamaForCausalLM']

    def one(rank):
        dist.init_process_group('fake', store=FakeStore(), rank=rank, world_size=WORLD)
        try:
            model = tiny.meta_model('llama', 'LlamaForCausalLM', cfg)
            ctx = MeshContext.build(FSDP2Config(), ParallelismSizes(dp_size=4, ep_size=2),
                                    world_size=WORLD)
            parallelize_model(model, ctx)
        finally:
            dist.destroy_process_group()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            one(0)
        return {'dp_shard': 4, 'tp': 1, 'ep': 2, 'refused': None}
    except Exception as e:  # noqa: BLE001
        tb = traceback.extract_tb(e.__traceback__)[-1]
        return {'dp_shard': 4, 'tp': 1, 'ep': 2,
                'refused': {'type': type(e).__name__, 'message': str(e)[:600],
                            'where': '%s:%d' % (os.path.basename(tb.filename), tb.lineno),
                            'rank': 0}}


def main():
    only = set(sys.argv[1:])
    index_path = os.path.join(OUT, 'INDEX.json')
    index = {}
    if only and os.path.exists(index_path):
        with open(index_path, encoding='utf-8') as f:
            index = json.load(f)['families']
    for fam, (model_type, arch) in FAMILIES.items():
        if only and fam not in only:
            continue
        try:
            # the class's own import first: an entry whose module does not
            # import is one upstream's registry drops
            import importlib
            from nemo_automodel._transformers.registry import MODEL_ARCH_MAPPING
            importlib.import_module(MODEL_ARCH_MAPPING[arch][0])
            cfg, dense_first = tiny_moe_config(model_type, arch)
            build(arch, cfg)
        except Exception as e:  # noqa: BLE001
            index[fam] = {'arch': arch, 'status': 'no-tiny-model',
                          'why': '%s: %s' % (type(e).__name__, str(e)[:300])}
            if fam in NOTES:
                index[fam]['note'] = NOTES[fam]
            print('skip', fam, type(e).__name__, str(e)[:200], file=sys.stderr)
            continue
        d = os.path.join(OUT, fam)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, 'config.json'), 'w', encoding='utf-8') as f:
            f.write(cfg.to_json_string(use_diff=False))
        golden = dict(goldens.versions(), family=fam, model_type=model_type, arch=arch,
                      world_size=WORLD, cases={})
        for case, (dp, tp, ep, experts) in CASES.items():
            c = cfg if experts == EXPERTS else tiny_moe_config(model_type, arch, experts)[0]
            golden['cases'][case] = dict({'dp_shard': dp, 'tp': tp, 'ep': ep, 'experts': experts},
                                         **run_case(arch, c, dp, tp, ep))
        goldens.dump(os.path.join(d, 'golden.json'), golden)
        goldens.dump(os.path.join(d, 'hf_names.json'), dict(goldens.versions(), **hf_names(arch, cfg)))
        index[fam] = {'arch': arch, 'model_type': model_type, 'status': 'golden',
                      'first_layer_dense': dense_first,
                      'cases': {k: 'refused' if 'refused' in v else 'ok'
                                for k, v in golden['cases'].items()}}
        print(fam, ' '.join('%s:%s' % (k, v) for k, v in index[fam]['cases'].items()),
              file=sys.stderr)
    if not only or 'dense_llama' in only:
        index['dense_llama'] = {'arch': 'LlamaForCausalLM', 'model_type': 'llama',
                                'status': 'refusal-only', 'dp4_ep2': dense_refusal()}
    goldens.dump(index_path, dict(goldens.versions(), families=dict(sorted(index.items()))))


if __name__ == '__main__':
    main()
