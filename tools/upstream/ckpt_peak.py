"""Peak of live activation bytes (saved tensors + transients, forward and
backward) of a transformers Llama step, with and without NeMo Automodel's
activation checkpointing, on CPU: every tensor an op creates is counted
from its creation until its storage's last tensor dies; parameters and
their final gradients are left out. Not a test input: docs/MEMORY.md
quotes what it prints.
usage: ckpt_peak.py MODEL_DIR BATCH SEQ   (MODEL_DIR: a config.json)"""
import json, sys, weakref
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from transformers import AutoConfig, AutoModelForCausalLM

class Live(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.refs = {}     # storage key -> [count, bytes]
        self.events = []   # (key, +bytes | -bytes)
        self.seen = weakref.WeakSet()
    def _drop(self, key):
        r = self.refs[key]
        r[0] -= 1
        if r[0] == 0:
            self.events.append((key, -r[1]))
            del self.refs[key]
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor) or t in self.seen:
                continue
            self.seen.add(t)
            st = t.untyped_storage()
            key = st.data_ptr()
            if key == 0 or st.nbytes() == 0:
                continue
            if key not in self.refs:
                self.refs[key] = [0, st.nbytes()]
                self.events.append((key, st.nbytes()))
            self.refs[key][0] += 1
            weakref.finalize(t, self._drop, key)
        return out

def run(cfg_path, b, t, mode):
    cfg = AutoConfig.from_pretrained(cfg_path)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).float()
    model.config.use_cache = False
    if mode == "layer":
        from nemo_automodel.components.distributed.activation_checkpointing import apply_full_layer_checkpointing_to_layers
        apply_full_layer_checkpointing_to_layers(model, list(model.model.layers))
    elif mode == "modules":
        from nemo_automodel.components.distributed.activation_checkpointing import apply_submodule_checkpointing
        apply_submodule_checkpointing(list(model.model.layers), False)
    ids = torch.randint(0, cfg.vocab_size, (b, t + 1))
    inp, tgt = ids[:, :t].contiguous(), ids[:, 1:].contiguous()
    m = Live()
    with m:
        logits = model(input_ids=inp).logits
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), tgt.reshape(-1))
        del logits
        loss.backward()
        del loss
    grads = {p.grad.untyped_storage().data_ptr() for p in model.parameters() if p.grad is not None}
    grads |= {p.untyped_storage().data_ptr() for p in model.parameters()}
    grads |= {bf.untyped_storage().data_ptr() for bf in model.buffers()}
    live = peak = 0
    for key, d in m.events:
        if key in grads:
            continue
        live += d
        peak = max(peak, live)
    return peak

if __name__ == "__main__":
    cfg, b, t = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    print(json.dumps({mode: run(cfg, b, t, mode) for mode in ("none", "layer", "modules")}))
