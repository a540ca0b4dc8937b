#!/usr/bin/env python3
"""A GGUF file of random quantized weights in a real model's shapes, for speed measurements only.

    bench/device/random_gguf.py {llama3-8b|qwen2.5-0.5b|tiny} \
        {F16|Q4_0|Q4_K_M|Q3_K_M|Q2_K|IQ4_XS|IQ4_NL|IQ3_M|IQ3_XXS|Q8_0|Q6_K|Q4_K} OUT.gguf

Every block is random bytes with its scales set to a small f16 (so activations stay finite), laid out as
ggml-common.h defines the type (F16: random signs and mantissas under one exponent per matrix); norms are ones, biases zeros. Q4_K_M follows llama-quantize's mix: Q6_K for the
output, and for attn_v / ffn_down in the first and last eighth of the layers and every third one between, Q4_K
elsewhere; Q3_K_M too (llama-quantize's choices for llama-like files): Q6_K for the output, Q4_K for attn_output,
ffn_down Q5_K in the first sixteenth of the layers and Q4_K after, attn_v Q5_K in the first two layers and Q4_K
after, Q3_K elsewhere; Q2_K as well: Q6_K for the output, Q3_K for attn_output and ffn_down, attn_v Q4_K where
four or more query heads share a KV head (Q3_K otherwise), Q2_K elsewhere; IQ4_XS and IQ4_NL: Q6_K for the output,
attn_v Q5_K where four or more query heads share a KV head, the type itself elsewhere (IQ4_XS's 6-bit sub-block
scales are random bytes too); IQ3_M as llama-quantize makes it: Q6_K for the output, Q4_K for attn_output and
attn_v, IQ3_S elsewhere (the grid entries, signs and 4-bit scales random too).
Rows that are not whole 256-element super-blocks take llama-quantize's stand-ins (K_FALLBACK;
Q3_K's and Q2_K's, IQ4_NL, is not written here: Q3_K_M and Q2_K are for shapes whose rows are whole super-blocks, llama3-8b). The
tokenizer is "none" with the vocabulary's size, which llama.cpp fills with dummy tokens (so llama-bench runs the
file) and `gerbil bench model` does not read. Plain Python (no numpy), so it runs on any
machine: random.randbytes and slice assignment keep it at a few seconds per GB.
"""
import math
import random
import struct
import sys

SHAPES = {  # hidden, intermediate, layers, heads, kv heads, head_dim, vocab, tied, qkv bias, arch, rope theta
    "llama3-8b": (4096, 14336, 32, 32, 8, 128, 128256, False, False, "llama", 500000.0),
    "qwen2.5-0.5b": (896, 4864, 24, 14, 2, 64, 151936, True, True, "qwen2", 1000000.0),
    "tiny": (256, 512, 2, 4, 2, 64, 512, False, True, "qwen2", 10000.0),
}
# type: (ggml id, elements per block, bytes per block, byte offsets of f16 scales inside a block)
TYPES = {"F16": (1, 1, 2, ()), "Q4_0": (2, 32, 18, (0,)), "Q5_0": (6, 32, 22, (0,)), "Q8_0": (8, 32, 34, (0,)),
         "Q5_1": (7, 32, 24, (0, 2)), "Q2_K": (10, 256, 84, (80, 82)), "Q3_K": (11, 256, 110, (108,)), "Q4_K": (12, 256, 144, (0, 2)),
         "Q5_K": (13, 256, 176, (0, 2)), "IQ4_NL": (20, 32, 18, (0,)), "IQ4_XS": (23, 256, 136, (0,)),
         "Q6_K": (14, 256, 210, (208,)), "IQ3_XXS": (18, 256, 98, (0,)), "IQ3_S": (21, 256, 110, (0,))}
# llama-quantize's stand-ins for rows that are not whole 256-element super-blocks (Qwen2.5-0.5B's 896).
K_FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
CHUNK = 1 << 26  # random.randbytes takes at most 2^28 bytes at once
ALIGN = 32


def f16_bits(x):
    return struct.unpack("<H", struct.pack("<e", x))[0]


def random_blocks(type_name, rows, cols):
    _, per_block, block_bytes, scales = TYPES[type_name]
    blocks = rows * cols // per_block
    size = blocks * block_bytes
    data = bytearray(b"".join(random.randbytes(min(CHUNK, size - at)) for at in range(0, size, CHUNK)))
    if type_name == "F16":
        # Keep each value's sign and two top mantissa bits from its high byte; the exponent makes it about
        # 1 / (8 sqrt(cols)), like the quantized types' weights.
        exponent = 15 + round(math.log2(1.0 / (8.0 * math.sqrt(cols))))
        high = bytes((b & 0x83) | (exponent << 2) for b in range(256))
        data[1::2] = data[1::2].translate(high)
        return bytes(data)
    # Small scales: weights of about 1 / sqrt(cols) whatever the integer range of the type.
    scale = f16_bits(1.0 / (64.0 * math.sqrt(cols)))
    for at in scales:
        data[at::block_bytes] = bytes([scale & 0xFF]) * blocks
        data[at + 1::block_bytes] = bytes([scale >> 8]) * blocks
    return bytes(data)


def f32s(values):
    return struct.pack(f"<{len(values)}f", *values)


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def main():
    preset, quant, out = sys.argv[1:4]
    hidden, inter, layers, heads, kv, head_dim, vocab, tied, bias, arch, theta = SHAPES[preset]
    random.seed(1)

    def matrix_type(role, layer):
        if quant == "Q3_K_M":
            if role == "output":
                return "Q6_K"
            if role == "attn_output":
                return "Q4_K"
            if role == "ffn_down":
                return "Q5_K" if layer < layers // 16 else "Q4_K"
            if role == "attn_v":
                return "Q5_K" if layer < 2 else "Q4_K"
            return "Q3_K"
        if quant == "Q2_K":
            if role == "output":
                return "Q6_K"
            if role == "attn_v":
                return "Q4_K" if heads // kv >= 4 else "Q3_K"
            return "Q3_K" if role in ("attn_output", "ffn_down") else "Q2_K"
        if quant == "IQ3_M":
            if role == "output":
                return "Q6_K"
            return "Q4_K" if role in ("attn_output", "attn_v") else "IQ3_S"
        if quant in ("IQ4_XS", "IQ4_NL"):
            if role == "output":
                return "Q6_K"
            return "Q5_K" if role == "attn_v" and heads // kv >= 4 else quant
        if quant != "Q4_K_M":
            return quant
        if role == "output":
            return "Q6_K"
        more_bits = layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2
        return "Q6_K" if role in ("attn_v", "ffn_down") and more_bits else "Q4_K"

    tensors = []  # (name, dims fastest first, ggml type id, bytes or a callable making them)

    def matrix(name, role, layer, rows, cols):
        t = matrix_type(role, layer)
        if cols % TYPES[t][1]:
            t = K_FALLBACK[t]
        tensors.append((name, (cols, rows), TYPES[t][0], lambda: random_blocks(t, rows, cols)))

    def vector(name, n, value):
        tensors.append((name, (n,), 0, lambda: f32s([value] * n)))

    matrix("token_embd.weight", "token_embd", 0, vocab, hidden)
    vector("output_norm.weight", hidden, 1.0)
    if not tied:
        matrix("output.weight", "output", 0, vocab, hidden)
    for i in range(layers):
        p = f"blk.{i}."
        vector(p + "attn_norm.weight", hidden, 1.0)
        vector(p + "ffn_norm.weight", hidden, 1.0)
        for role, rows in (("attn_q", heads * head_dim), ("attn_k", kv * head_dim), ("attn_v", kv * head_dim)):
            matrix(p + role + ".weight", role, i, rows, hidden)
            if bias:
                vector(p + role + ".bias", rows, 0.0)
        matrix(p + "attn_output.weight", "attn_output", i, hidden, heads * head_dim)
        matrix(p + "ffn_gate.weight", "ffn_gate", i, inter, hidden)
        matrix(p + "ffn_up.weight", "ffn_up", i, inter, hidden)
        matrix(p + "ffn_down.weight", "ffn_down", i, hidden, inter)

    u32 = lambda k, v: gguf_string(k) + struct.pack("<II", 4, v)
    f32 = lambda k, v: gguf_string(k) + struct.pack("<If", 6, v)
    kvs = [gguf_string("general.architecture") + struct.pack("<I", 8) + gguf_string(arch),
           u32("general.alignment", ALIGN), u32(arch + ".block_count", layers),
           u32(arch + ".embedding_length", hidden), u32(arch + ".feed_forward_length", inter),
           u32(arch + ".context_length", 32768), u32(arch + ".attention.head_count", heads),
           u32(arch + ".attention.head_count_kv", kv), u32(arch + ".vocab_size", vocab),
           gguf_string("tokenizer.ggml.model") + struct.pack("<I", 8) + gguf_string("none"), u32(arch + ".attention.key_length", head_dim),
           u32(arch + ".attention.value_length", head_dim), f32(arch + ".attention.layer_norm_rms_epsilon", 1e-6),
           f32(arch + ".rope.freq_base", theta), u32(arch + ".rope.dimension_count", head_dim)]

    def nbytes(dims, type_id):
        n = math.prod(dims)
        if type_id == 0:
            return 4 * n
        per_block, block_bytes = next((t[1], t[2]) for t in TYPES.values() if t[0] == type_id)
        return n // per_block * block_bytes

    infos, offset = [], 0
    for name, dims, type_id, _ in tensors:
        infos.append(gguf_string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims) +
                     struct.pack("<IQ", type_id, offset))
        offset += (nbytes(dims, type_id) + ALIGN - 1) // ALIGN * ALIGN
    with open(out, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + b"".join(infos))
        f.write(b"\0" * (-f.tell() % ALIGN))
        for name, dims, type_id, make in tensors:
            data = make()
            assert len(data) == nbytes(dims, type_id), name
            f.write(data + b"\0" * (-len(data) % ALIGN))
    print(f"{out}: {preset} {quant}, {len(tensors)} tensors, {offset / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
