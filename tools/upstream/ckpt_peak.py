"""Peak of live activation bytes (saved tensors + transients, forward and
backward) of a transformers Llama step, with and without NeMo Automodel's
activation checkpointing, on CPU: every storage an op creates is counted
from that op until the storage itself is freed (a weak reference to the
storage, polled at every op: deterministic, unlike a Python object's
finalizer); parameters, buffers and the parameters' gradients are left
out. Each mode prints the step's peak and, as "layers", the peak once the
last logits-sized buffer (the loss's and lm_head's) is given back: the
decoder layers' backward. Not a
test input: docs/MEMORY.md quotes what it prints.
usage: ckpt_peak.py MODEL_DIR BATCH SEQ   (MODEL_DIR: a config.json)"""
import json, sys
import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from transformers import AutoConfig, AutoModelForCausalLM

class Live(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.alive = {}    # data_ptr -> entry, storages not yet freed
        self.entries = []  # [weak ref, bytes, born, freed or None, op, data_ptr]
        self.op = 0
    def poll(self):
        for key, e in list(self.alive.items()):
            if e[0].expired():
                e[3] = self.op
                del self.alive[key]
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.op += 1
        self.poll()  # what was freed since the last op, before this one's outputs
        out = func(*args, **(kwargs or {}))
        self.op += 1
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            st = t.untyped_storage()
            key = st.data_ptr()
            if key == 0 or st.nbytes() == 0 or key in self.alive:
                continue
            e = [StorageWeakRef(st), st.nbytes(), self.op, None, str(func), key]
            self.alive[key] = e
            self.entries.append(e)
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
    m.op += 1
    m.poll()
    held = {p.grad.untyped_storage().data_ptr() for p in model.parameters() if p.grad is not None}
    held |= {p.untyped_storage().data_ptr() for p in model.parameters()}
    held |= {bf.untyped_storage().data_ptr() for bf in model.buffers()}
    delta = [0] * (m.op + 2)
    loss_end = None
    vocab_bytes = b * t * cfg.vocab_size * 4
    for e in m.entries:
        if e[3] is None and e[5] in held:
            continue  # a gradient (or parameter) still held: not an activation
        delta[e[2]] += e[1]
        if e[3] is not None:
            delta[e[3]] -= e[1]
        if e[1] >= vocab_bytes and e[3] is not None:  # logits-sized: the head's
            loss_end = max(loss_end or 0, e[3])
    live = peak = layers = 0
    for i, d in enumerate(delta):
        live += d
        peak = max(peak, live)
        if loss_end is not None and i >= loss_end:
            layers = max(layers, live)
    return {"peak": peak, "layers": layers}

if __name__ == "__main__":
    cfg, b, t = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    print(json.dumps({mode: run(cfg, b, t, mode) for mode in ("none", "layer", "modules")}))
