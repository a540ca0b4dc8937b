#!/usr/bin/env python3
"""Writes the small seed inputs in fuzz/corpus/<name>/ from the reference fixtures (../shared/fixtures) and
the tokenizer packages (.deps/tokenizers). Seeds are kept small so that the fuzzer's mutations land in the
structure that matters: safetensors files keep every fixture's tensor names, dtypes and ranks with 1-2
elements per dimension; tokenizer.json files keep their pipeline (normalizer, pre-tokenizer, decoder,
post-processor, added tokens) with the first few hundred vocabulary entries and the merges among them.
Run from the repository root: python3 fuzz/make_seeds.py (it replaces the seeds it writes)."""
import json
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT.parent / "shared" / "fixtures"
TOKENIZERS = ROOT / ".deps" / "tokenizers"
CORPUS = ROOT / "fuzz" / "corpus"
SEPARATOR = "\n#---#\n"  # fuzz_support.h's kPartSeparator
DTYPE_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def write(name, file, data):
    folder = CORPUS / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / file).write_bytes(data if isinstance(data, bytes) else data.encode())


def small_safetensors(path):
    raw = path.read_bytes()
    header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
    out, offset = {}, 0
    for name, spec in header.items():
        if name == "__metadata__":
            out[name] = spec
            continue
        shape = [min(d, 2) for d in spec["shape"]]
        size = DTYPE_SIZE[spec["dtype"]]
        for d in shape:
            size *= d
        out[name] = {"dtype": spec["dtype"], "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(out, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + bytes(range(256)) * (offset // 256) + bytes(offset % 256)


def small_tokenizer(path, keep):
    tok = json.loads(path.read_text())
    model = tok["model"]
    vocab = {piece: i for piece, i in model["vocab"].items() if i < keep}
    model["vocab"] = vocab
    merges = []
    for merge in model.get("merges", []):
        a, b = merge.split(" ", 1) if isinstance(merge, str) else merge
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(merge)
    model["merges"] = merges
    tok["added_tokens"] = tok.get("added_tokens", [])[:24]
    return json.dumps(tok, ensure_ascii=False, indent=1)


def iq3_gguf():
    """A GGUF v3 file of one IQ3_XXS and one IQ3_S tensor of 256 elements each (ggml ids 18 and 21; 98 and 110
    bytes a block), every byte but the f16 scale (1.0) counting up, so that the dequantizers run on it."""
    def string(s):
        return struct.pack("<Q", len(s)) + s.encode()
    tensors = [("iq3_xxs", 18, 98), ("iq3_s", 21, 110)]
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 0)
    offset = 0
    for name, type_id, size in tensors:
        out += string(name) + struct.pack("<IQIQ", 1, 256, type_id, offset)
        offset += (size + 31) // 32 * 32
    out += bytes(-len(out) % 32)
    for _, _, size in tensors:
        block = struct.pack("<e", 1.0) + bytes(i * 7 % 256 for i in range(size - 2))
        out += block + bytes(-size % 32)
    return out


def main():
    long_models = ROOT / "tests" / "data" / "long"  # rope scalings (YaRN, LongRoPE) the fixtures do not have
    for model in sorted(p for folder in (FIXTURES, long_models) for p in folder.iterdir() if (p / "config.json").exists()):
        config = (model / "config.json").read_text()
        generation = model / "generation_config.json"
        write("config", model.name + ".json",
              config + (SEPARATOR + generation.read_text() if generation.exists() else ""))
        if (model / "model.safetensors").exists():
            write("safetensors", model.name + ".safetensors", small_safetensors(model / "model.safetensors"))
    write("gguf", "iq3.gguf", iq3_gguf())
    for name in ("qwen3", "llama3", "llama2", "gemma3"):
        write("tokenizer", name + ".json", small_tokenizer(TOKENIZERS / name / "tokenizer.json", keep=400))
        config = json.loads((TOKENIZERS / name / "tokenizer_config.json").read_text())
        template = config.get("chat_template")
        if not isinstance(template, str):
            continue
        refs = FIXTURES / "tokenizers" / name / "chat_template_ref.json"
        cases = json.loads(refs.read_text()) if refs.exists() else [{"messages": [{"role": "user", "content": "Hi"}]}]
        seen = set()
        for i, case in enumerate(cases):
            messages = json.dumps(case["messages"], ensure_ascii=False)
            if messages not in seen:
                seen.add(messages)
                write("template", f"{name}_{i}.txt", template + SEPARATOR + messages)


if __name__ == "__main__":
    main()
