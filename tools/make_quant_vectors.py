#!/usr/bin/env python3
"""Test vectors for gerbil's ggml block decoders from an independent implementation: llama.cpp's gguf-py.

For every block type gerbil decodes (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS,
IQ3_XXS, IQ3_S), this writes random blocks and the values gguf-py's `gguf.quants.dequantize` (numpy, written apart
from ggml's C) gives them: OUT/<TYPE>.blocks (the blocks as a GGUF file stores them) and OUT/<TYPE>.f32
(little-endian float32, one per element). Every byte is random but the f16 scales, which are finite: ordinary values and the extremes (zeros of
both signs, subnormals, +-65504). tests/test_model_quant.cpp reads them.

    tools/make_quant_vectors.py LLAMA_CPP OUT      (needs numpy; LLAMA_CPP is a llama.cpp source folder)
"""
import random
import struct
import sys
import types
from pathlib import Path

BLOCKS = 8  # per type: 2,048 elements of the K-quants, 256 of the others
SEED = 20261205
# type: byte offsets of its f16 scales in a block
SCALES = {"Q8_0": (0,), "Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q2_K": (80, 82), "Q3_K": (108,),
          "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,), "IQ4_NL": (0,), "IQ4_XS": (0,),
          "IQ3_XXS": (0,), "IQ3_S": (0,)}
EXTREMES = (0x0000, 0x8000, 0x0001, 0x03FF, 0x8001, 0x7BFF, 0xFBFF, 0x3C00, 0xB800, 0x2E66)


def main():
    llama_cpp, out = Path(sys.argv[1]), Path(sys.argv[2])
    sys.path.insert(0, str(llama_cpp / "gguf-py"))
    # The package's __init__ imports its vocabulary module, which needs sentencepiece; the quants do not.
    for module in ("sentencepiece", "yaml"):
        try:
            __import__(module)
        except ImportError:
            stub = types.ModuleType(module)
            stub.SentencePieceProcessor = None
            sys.modules[module] = stub
    import numpy as np
    from gguf import GGMLQuantizationType
    from gguf.constants import GGML_QUANT_SIZES
    from gguf.quants import dequantize

    rng = random.Random(SEED)
    out.mkdir(parents=True, exist_ok=True)
    for name, offsets in SCALES.items():
        qtype = GGMLQuantizationType[name]
        elements, block_bytes = GGML_QUANT_SIZES[qtype]
        data = bytearray(rng.randbytes(BLOCKS * block_bytes))
        for b in range(BLOCKS):
            for offset in offsets:
                half = rng.choice(EXTREMES) if rng.random() < 0.4 else rng.getrandbits(16) & 0xFBFF  # finite
                struct.pack_into("<H", data, b * block_bytes + offset, half)
        blocks = np.frombuffer(bytes(data), dtype=np.uint8).reshape(BLOCKS, block_bytes)
        values = dequantize(blocks, qtype).astype("<f4").reshape(-1)
        assert values.size == BLOCKS * elements
        (out / f"{name}.blocks").write_bytes(bytes(data))
        (out / f"{name}.f32").write_bytes(values.tobytes())
        print(f"{name}: {BLOCKS} blocks, {values.size} values")


if __name__ == "__main__":
    main()
