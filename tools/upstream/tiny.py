"""tiny.py -- shared by hf_tables.py and goldens.py (needs torch + transformers
+ nemo_automodel; see README.md): which transformers model types are text
decoders with a base_model_tp_plan, and how each is shrunk to a tiny config
built from its config class defaults."""
import torch

# Ints shrunk wherever the config class has them (the value is the new one).
SCALARS = {
    'hidden_size': 64, 'intermediate_size': 128, 'moe_intermediate_size': 32,
    'shared_expert_intermediate_size': 32, 'expert_intermediate_size': 32,
    'ffn_hidden_size': 128, 'head_dim': 16, 'vocab_size': 512, 'unpadded_vocab_size': 500,
    'q_lora_rank': 32, 'kv_lora_rank': 32, 'qk_rope_head_dim': 8,
    'qk_nope_head_dim': 8, 'v_head_dim': 16, 'qk_head_dim': 16,
    'n_routed_experts': 4, 'num_local_experts': 4, 'num_experts': 4,
    'n_shared_experts': 1, 'num_shared_experts': 1,
    'num_experts_per_tok': 2, 'moe_topk': 2, 'top_k': 2,
    'n_group': 1, 'topk_group': 1,
    'mamba_n_heads': 8, 'mamba_d_head': 16, 'mamba_d_state': 16,
    'mamba_n_groups': 1, 'vocab_size_per_layer_input': 512, 'hidden_size_per_layer_input': 16, 'mamba_d_ssm': 128, 'index_num_heads': 2, 'index_n_heads': 2, 'mamba_expand': 2, 'mamba_chunk_size': 16,
    'linear_num_key_heads': 2, 'linear_num_value_heads': 4,
    'linear_key_head_dim': 16, 'linear_value_head_dim': 16,
    'state_size': 16, 'n_embd': 64, 'n_head': 4, 'n_layer': 2,
    'rotary_dim': 8, 'max_position_embeddings': 256, 'sliding_window': 64,
    'attention_chunk_size': 64, 'num_key_value_heads': None,  # below
}
# Set even where the class default is None (the modeling code reads them).
NONE_OK = ('head_dim',)
# Per-type overrides applied after SCALARS (structure the generic rule misses).
OVERRIDES = {
    'jamba': {'num_hidden_layers': 4, 'attn_layer_period': 2, 'attn_layer_offset': 1,
              'expert_layer_period': 2, 'expert_layer_offset': 1},
    'bamba': {'attn_layer_indices': [1]},
    'longcat_flash': {'num_layers': 1},
    'gemma3n_text': {'num_hidden_layers': 4, 'num_kv_shared_layers': 2,
                     'layer_types': ['sliding_attention', 'full_attention'] * 2},
    'lfm2_moe': {'layer_types': ['conv', 'full_attention']},
    'dots1': {'num_local_experts': 4, 'first_k_dense_replace': 1, 'n_shared_experts': 1},
    # the class default ({}) names no rope for its layer type, which the
    # model's rotary embedding reads (KeyError: 'full_attention'); a real
    # config names one
    'cohere_compass_text': {'rope_parameters': {'full_attention': {
        'rope_type': 'default', 'rope_theta': 10000.0}}},
    # the CausalLM class carries the vision and audio encoders: shrunk too
    'phi4_multimodal': {
        'vision_config': {'hidden_size': 64, 'intermediate_size': 128, 'num_hidden_layers': 2,
                          'num_attention_heads': 4},
        'audio_config': {'hidden_size': 64, 'intermediate_size': 128, 'num_blocks': 2,
                         'num_attention_heads': 4, 'ext_pw_out_channel': 64,
                         'depthwise_separable_out_channel': 64, 'nemo_conv_channels': 64}},
}
# Composite configs whose CausalLM class is built from the text config (as
# AutoModelForCausalLM.from_config builds it): the text config is shrunk as
# its own model type.
TEXT_CONFIG_TYPES = ('llama4',)


def text_decoder_types():
    """(model_type, CausalLM class name) for every CausalLM mapping entry
    whose config class carries a base_model_tp_plan, in mapping order."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    out = []
    for mt, cls in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items():
        try:
            cc = CONFIG_MAPPING[mt]
        except Exception:  # noqa: BLE001 - a mapping entry without a config
            continue
        if getattr(cc, 'base_model_tp_plan', None):
            out.append((mt, cls))
    return out


def automodel_custom_archs():
    from nemo_automodel._transformers.registry import MODEL_ARCH_MAPPING
    return set(MODEL_ARCH_MAPPING)


def _kv_heads(default_heads, default_kv):
    if default_kv is None or default_kv == default_heads:
        return 4
    if default_kv == 1:
        return 1
    return 2


def _pick_layers(values, n):
    """A length-n list of layer kinds keeping every distinct kind."""
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    out = list(values[:n])
    for v in seen:
        if v not in out:
            out[len(out) - 1 - seen.index(v) % len(out)] = v
    return out


def tiny_config(model_type):
    """The tiny config (a PretrainedConfig) for model_type: the class
    defaults with SCALARS and OVERRIDES applied; layer lists cut to the
    new layer count, keeping every kind of layer."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    cls = CONFIG_MAPPING[model_type]
    d0 = cls()
    dd = d0.to_dict()
    kw = {}
    for k, v in SCALARS.items():
        cur = dd.get(k)
        if k == 'num_key_value_heads':
            continue
        if cur is None and k in NONE_OK and k in dd:
            kw[k] = v
        if not isinstance(cur, int) or isinstance(cur, bool):
            continue
        kw[k] = v
    heads = dd.get('num_attention_heads')
    if isinstance(heads, int):
        kw['num_attention_heads'] = 4
        kv = dd.get('num_key_value_heads')
        if isinstance(kv, int) or kv is None and 'num_key_value_heads' in dd:
            kw['num_key_value_heads'] = _kv_heads(heads, kv)
    old_n = dd.get('num_hidden_layers')
    n = 2
    for k in ('first_k_dense_replace', 'first_dense_layers', 'num_dense_layers'):
        v = dd.get(k)
        if isinstance(v, int) and v > 0:
            kw[k] = 1
            n = 2
    if isinstance(old_n, int):
        kw['num_hidden_layers'] = n
    kw.update(OVERRIDES.get(model_type, {}))
    if model_type in TEXT_CONFIG_TYPES:
        kw['text_config'] = tiny_config(d0.text_config.model_type).to_dict()
    n = kw.get('num_hidden_layers', n)
    for k, v in dd.items():
        if isinstance(v, list) and isinstance(old_n, int) and len(v) == old_n and old_n > n \
                and k not in kw:
            if all(isinstance(x, str) for x in v):
                kw[k] = _pick_layers(v, n)
            elif k.endswith('intermediate_size') or all(isinstance(x, int) for x in v):
                kw[k] = [kw.get('intermediate_size', 128) if isinstance(x, int) and x > 64 else x
                         for x in v[:n]]
            else:
                kw[k] = v[:n]
    for k, v in dd.items():
        if k.endswith('token_id') and isinstance(v, int) and v >= kw.get('vocab_size', 1 << 30):
            kw[k] = 1
        if k.endswith('token_id') and isinstance(v, list):
            kw[k] = [x if x < kw.get('vocab_size', 1 << 30) else 1 for x in v]
    try:
        cfg = cls(**kw)
    except Exception:  # noqa: BLE001 - retry without the layer lists
        kw = {k: v for k, v in kw.items() if not isinstance(v, list) or k in OVERRIDES.get(model_type, {})}
        cfg = cls(**kw)
    cfg.dtype = torch.bfloat16
    return cfg


def meta_model(model_type, arch, cfg):
    """The CausalLM class built from cfg on the meta device, in bf16."""
    import transformers
    cls = getattr(transformers, arch)
    cfg.architectures = [arch]
    with torch.device('meta'):
        if not isinstance(cfg, cls.config_class):  # a composite config (llama4)
            return transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
        return cls._from_config(cfg, dtype=torch.bfloat16)


def buffers(model):
    """(name, buffer, persistent) for each buffer of model, module by module
    in named_modules order, an empty (None) slot skipped: the buffers
    goldens.py and hf_tables.py record."""
    for mod_name, mod in model.named_modules():
        for bname, b in mod.named_buffers(recurse=False):
            if b is not None:
                full = mod_name + '.' + bname if mod_name else bname
                yield full, b, bname not in mod._non_persistent_buffers_set
