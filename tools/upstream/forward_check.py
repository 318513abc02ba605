"""forward_check.py — does NeMo Automodel 0.7.0's parallelized model (the
goldens' tiny config, transformers 5.25, world 2 under torch's fake process
group, on CPU: shapes only, the collectives move nothing) get through one
forward? Where tpx refuses a plan that upstream applies (qk-norm-whole-width:
OLMo-2's whole-width q/k norms under a colwise q/k), this shows what
upstream's run does with it.

usage: /work/upstream-venv/bin/python tools/upstream/forward_check.py TYPE ARCH [TYPE ARCH ...]
  e.g. olmo2 Olmo2ForCausalLM llama LlamaForCausalLM
Seen with the pinned versions (tools/upstream/README.md):
  olmo2 Olmo2ForCausalLM: forward FAILED: RuntimeError The size of tensor a (64)
      must match the size of tensor b (32) at non-singleton dimension 2
  llama LlamaForCausalLM: forward OK
"""
import sys

import goldens as g  # the pinned stack, the shims and the tiny configs
import torch
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore


def check(model_type, arch):
    dist.init_process_group('fake', store=FakeStore(), rank=0, world_size=2)
    try:
        cfg = g.tiny.tiny_config(model_type)
        model = g.tiny.meta_model(model_type, arch, cfg)
        mesh, _ = g._create_fsdp2_device_mesh(g.ParallelismSizes(tp_size=2, dp_size=1),
                                              world_size=2)
        model = g.fsdp2_strategy_parallelize(model, mesh, sequence_parallel=False)
        model.to_empty(device='cpu')
        try:
            model(input_ids=torch.zeros(1, 4, dtype=torch.long))
            return 'forward OK'
        except Exception as e:  # what upstream's run would raise
            return 'forward FAILED: %s %s' % (type(e).__name__, str(e)[:200])
    finally:
        dist.destroy_process_group()


def main(argv):
    if len(argv) < 2 or len(argv) % 2:
        sys.exit(__doc__)
    for i in range(0, len(argv), 2):
        print('%s %s: %s' % (argv[i], argv[i + 1], check(argv[i], argv[i + 1])))


if __name__ == '__main__':
    main(sys.argv[1:])
