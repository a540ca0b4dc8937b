#!/usr/bin/env python3
"""A GPTQ int4 folder of random weights in a real model's shapes, for speed measurements only.

    bench/device/random_gptq.py F16_FOLDER OUT_FOLDER [GROUP_SIZE]

Takes a float16 Hugging Face folder (`gerbil synth --dtype f16`) and replaces every linear weight of its layers
(q/k/v/o and gate/up/down projections, `*_proj.weight`) by GPTQ v1 tensors: random 4-bit quants, zero points 8
(stored 7, symmetric), scales of about 1 / (8 sqrt(in)) so activations stay finite, act-order off (g_idx
k // group). Embeddings, norms, biases and the LM head are copied. Needs torch and safetensors.
"""
import json
import math
import shutil
import sys
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file


def gptq_tensors(name, weight_shape, group, generator):
    out_features, in_features = weight_shape
    groups = in_features // group
    base = name[: -len(".weight")]
    qweight = torch.randint(-(2**31), 2**31 - 1, (in_features // 8, out_features), dtype=torch.int32,
                            generator=generator)
    qzeros = torch.full((groups, out_features // 8), 0x77777777, dtype=torch.int32)
    scale = 1.0 / (8.0 * math.sqrt(in_features))
    scales = (torch.rand((groups, out_features), generator=generator) * scale + scale / 2).to(torch.float16)
    g_idx = (torch.arange(in_features, dtype=torch.int32) // group).to(torch.int32)
    return {base + ".qweight": qweight, base + ".qzeros": qzeros, base + ".scales": scales, base + ".g_idx": g_idx}


def main():
    source, out = Path(sys.argv[1]), Path(sys.argv[2])
    group = int(sys.argv[3]) if len(sys.argv) > 3 else 128
    out.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(1)
    tensors = {}
    for file in sorted(source.glob("*.safetensors")):
        with safe_open(file, framework="pt") as f:
            for name in f.keys():
                if name.startswith("model.layers.") and name.endswith("_proj.weight"):
                    tensors.update(gptq_tensors(name, f.get_slice(name).get_shape(), group, generator))
                else:
                    tensors[name] = f.get_tensor(name)
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((source / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": group, "desc_act": False,
                                     "sym": True, "checkpoint_format": "gptq"}
    (out / "config.json").write_text(json.dumps(config, indent=2))
    for extra in source.iterdir():
        if extra.suffix != ".safetensors" and extra.name not in ("config.json", "model.safetensors.index.json"):
            shutil.copy(extra, out / extra.name)


if __name__ == "__main__":
    main()
