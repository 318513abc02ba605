"""tf5_names.py: the tensor names and shapes of transformers' own
MuseGlimmerForConditionalGeneration (the transformers-5 checkpoint naming)
built on the meta device from muse-glimmer-tiny.config.json, written to
muse-glimmer-tiny.tf5-names.txt ("name dim,dim,..." per line). Run once
with the fixtures' Python (torch + transformers 5); the tests read the
text file only (test_mistral.c: every name maps through the plugin's name
aliases to a skeleton parameter of the same shape)."""
import json
import os

import torch
from transformers.models.muse_glimmer import modeling_muse_glimmer as mg
from transformers.models.muse_glimmer.configuration_muse_glimmer import (
    MuseGlimmerConfig,
)

here = os.path.dirname(os.path.abspath(__file__))
cfg = json.load(open(os.path.join(here, "muse-glimmer-tiny.config.json")))
cfg.pop("architectures", None)
with torch.device("meta"):
    model = mg.MuseGlimmerForConditionalGeneration(MuseGlimmerConfig(**cfg))
with open(os.path.join(here, "muse-glimmer-tiny.tf5-names.txt"), "w") as f:
    for name, t in model.state_dict().items():
        f.write("%s %s\n" % (name, ",".join(str(d) for d in t.shape)))
