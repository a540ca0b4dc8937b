#!/usr/bin/env python3
"""GGUF fixtures made by llama.cpp's own tools, with float64 transformers references.

For tiny random Hugging Face models of several architectures (hidden 256, intermediate 256, 2 layers, so that
llama.cpp's K-quants apply to every matrix), this script
  1. builds llama-quantize from LLAMA_CPP (CPU only),
  2. writes each model with transformers (random weights, a real byte-level BPE tokenizer cut to a small
     vocabulary, its chat template),
  3. converts it with llama.cpp's convert_hf_to_gguf.py (f32) and quantizes that with llama-quantize
     (Q8_0, Q4_0, Q4_K_M, Q6_K, Q3_K_M; any other type llama-quantize makes without an importance matrix with
     --quants, e.g. IQ4_NL, IQ4_XS),
  4. reads every quantized file back with llama.cpp's gguf-py, dequantizes each tensor with gguf-py's
     dequantize, undoes what the converter changed (llama's Q/K row permutation, Gemma's norm + 1), loads the
     result into the transformers model in float64 and records its logits for a few prompts.

Outputs in OUT: <arch>-<quant>.gguf, <arch>-<quant>.logits.f32 (little-endian float32, the prompts' rows one
after another, [tokens, vocab] each) and references.json describing them (prompts, their token ids, shapes).

    tools/make_gguf_fixtures.py LLAMA_CPP OUT [--tokenizers DIR] [--archs llama,qwen2,...] [--quants ...]
    tools/make_gguf_fixtures.py --cut-tokenizers-only DIR_OUT [--tokenizers DIR]

The converter's vocabulary step is replaced (its pre-tokenizer check hashes the encoding of a test text, which
a cut vocabulary changes, and Gemma's and Phi-3's expect a SentencePiece model): the tokens, types and merges
are written as convert_hf_to_gguf.py's _set_vocab_gpt2 writes them, from tokenizer.json itself.
Needs torch, transformers, numpy, tokenizers (the last only for the prompts' ids), cmake and a C++ compiler.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

VOCAB = 384  # rows of the embedding table: the cut tokenizer's regular tokens plus its special tokens
HIDDEN, INTERMEDIATE, LAYERS, HEADS, KV_HEADS = 256, 256, 2, 4, 2
QUANTS = ["Q8_0", "Q4_0", "Q4_K_M", "Q6_K", "Q3_K_M"]
PROMPTS = ["Hello world! How are you today?", "The quick brown fox jumps over 13 lazy dogs."]

# Which tokenizer package each architecture borrows, the llama.cpp pre-tokenizer name it has, its special
# tokens (put after the regular ones) and the config's bos/eos among them.
TOKENIZERS = {
    "qwen3": {"pre": "qwen2", "special": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
              "bos": None, "eos": "<|im_end|>"},
    "llama3": {"pre": "llama-bpe",
               "special": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                           "<|eot_id|>"],
               "bos": "<|begin_of_text|>", "eos": "<|eot_id|>"},
}

# Hugging Face model_type, tokenizer, extra config and whether llama.cpp's converter permutes Q/K (llama) or
# stores norms as 1 + w (gemma).
ARCHS = {
    "llama": {"model_type": "llama", "tokenizer": "llama3", "config": {"tie_word_embeddings": False}},
    "qwen2": {"model_type": "qwen2", "tokenizer": "qwen3", "config": {"tie_word_embeddings": True}},
    "gemma": {"model_type": "gemma", "tokenizer": "qwen3",
              "config": {"tie_word_embeddings": True, "head_dim": HIDDEN // HEADS,
                         "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh"}},
    "phi3": {"model_type": "phi3", "tokenizer": "qwen3",
             "config": {"tie_word_embeddings": False, "original_max_position_embeddings": 256,
                        "sliding_window": None, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attention_dropout": 0.0}},
}

log = logging.getLogger("make_gguf_fixtures")


# --- tokenizers --------------------------------------------------------------------------------------------

def cut_tokenizer(package: Path, name: str, out: Path) -> None:
    """Writes OUT/tokenizer.json and tokenizer_config.json: the package's byte-level BPE cut to its first
    regular tokens and the merges among them, its special tokens renumbered after those, no post-processor
    (no BOS added), the package's chat template. Cutting a cut tokenizer gives it back unchanged."""
    spec = TOKENIZERS[name]
    tok = json.loads((package / "tokenizer.json").read_text(encoding="utf-8"))
    config = json.loads((package / "tokenizer_config.json").read_text(encoding="utf-8"))
    specials = spec["special"]
    regular = VOCAB - len(specials)
    special_set = set(specials)
    vocab = {t: i for t, i in tok["model"]["vocab"].items() if i < regular and t not in special_set}
    if len(vocab) != regular:
        raise SystemExit(f"{package}: ids below {regular} are not all regular tokens")
    merges = []
    for merge in tok["model"]["merges"]:
        a, b = merge.split(" ", 1) if isinstance(merge, str) else merge
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(f"{a} {b}")
    added = [{"id": regular + k, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for k, s in enumerate(specials)]
    tok["model"]["vocab"] = vocab
    tok["model"]["merges"] = merges
    tok["added_tokens"] = added
    tok["post_processor"] = None
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": False, "add_eos_token": False,
        "bos_token": spec["bos"], "eos_token": spec["eos"], "clean_up_tokenization_spaces": False,
        "chat_template": config["chat_template"],
        "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"} for a in added},
    }, ensure_ascii=False, indent=1), encoding="utf-8")
    log.info("%s: %d regular tokens, %d merges, specials %s", out, regular, len(merges), specials)


def token_id(tokenizer_dir: Path, content: str | None) -> int | None:
    if content is None:
        return None
    for a in json.loads((tokenizer_dir / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]:
        if a["content"] == content:
            return a["id"]
    raise KeyError(content)


# --- llama.cpp ---------------------------------------------------------------------------------------------

def build_quantize(llama: Path, build: Path) -> Path:
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.run(["cmake", "-S", str(llama), "-B", str(build), *generator, "-DCMAKE_BUILD_TYPE=Release",
                    "-DGGML_CUDA=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_TESTS=OFF",
                    "-DLLAMA_BUILD_EXAMPLES=ON", "-DBUILD_SHARED_LIBS=OFF"], check=True)
    subprocess.run(["cmake", "--build", str(build), "--target", "llama-quantize", "-j", str(os.cpu_count() or 4)],
                   check=True)
    return build / "bin" / "llama-quantize"


def import_converter(llama: Path):
    """convert_hf_to_gguf as a module, its vocabulary step replaced (see the module's docstring)."""
    sys.path.insert(0, str(llama / "gguf-py"))
    sys.path.insert(0, str(llama))
    import convert_hf_to_gguf as convert
    import gguf

    def set_vocab_from_tokenizer_json(self):
        tok = json.loads((self.dir_model / "tokenizer.json").read_text(encoding="utf-8"))
        n = self.hparams["vocab_size"]
        tokens = [f"[PAD{i}]" for i in range(n)]
        types = [gguf.TokenType.UNUSED] * n
        for t, i in tok["model"]["vocab"].items():
            tokens[i], types[i] = t, gguf.TokenType.NORMAL
        for a in tok["added_tokens"]:
            tokens[a["id"]] = a["content"]
            types[a["id"]] = gguf.TokenType.CONTROL if a["special"] else gguf.TokenType.USER_DEFINED
        self.gguf_writer.add_tokenizer_model("gpt2")
        self.gguf_writer.add_tokenizer_pre(self.fixture_pre)
        self.gguf_writer.add_token_list(tokens)
        self.gguf_writer.add_token_types(types)
        gguf.SpecialVocab(self.dir_model, load_merges=True).add_to_gguf(self.gguf_writer)

    convert.Model.set_vocab = set_vocab_from_tokenizer_json
    for cls in vars(convert).values():
        if isinstance(cls, type) and issubclass(cls, convert.Model) and "set_vocab" in vars(cls):
            cls.set_vocab = set_vocab_from_tokenizer_json
    return convert, gguf


def convert_to_gguf(convert, hf_dir: Path, out: Path, pre: str) -> None:
    convert.Model.fixture_pre = pre
    argv = sys.argv
    sys.argv = ["convert_hf_to_gguf.py", str(hf_dir), "--outfile", str(out), "--outtype", "f32"]
    try:
        convert.main()
    finally:
        sys.argv = argv


# --- transformers ------------------------------------------------------------------------------------------

def make_hf_model(arch: str, out: Path, tokenizer_dir: Path, seed: int):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = ARCHS[arch]
    tok_spec = TOKENIZERS[spec["tokenizer"]]
    kwargs = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=LAYERS,
                  num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, max_position_embeddings=256,
                  rms_norm_eps=1e-5, rope_theta=10000.0, bos_token_id=token_id(tokenizer_dir, tok_spec["bos"]),
                  eos_token_id=token_id(tokenizer_dir, tok_spec["eos"]), pad_token_id=None, **spec["config"])
    config = AutoConfig.for_model(spec["model_type"], **kwargs)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):  # Gemma's norms compute x * (1 + w): w is centred on 0
                centre = 0.0 if arch == "gemma" else 1.0
                if config.tie_word_embeddings and name.endswith("model.norm.weight"):
                    # A tied model's final norm has a zero-mean effective weight, as the fixtures' do: otherwise
                    # random tied weights just repeat the current token.
                    p.copy_(torch.randn_like(p) - (1.0 - centre))
                else:
                    p.copy_(centre + 0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn_like(p))
            elif "embed_tokens" in name:
                p.copy_(torch.randn_like(p))
            else:  # linear [out, in]
                p.copy_(torch.randn_like(p) / p.shape[1] ** 0.5)
    model.save_pretrained(out, safe_serialization=True)
    # The February 2025 converter reads the legacy keys; transformers 5 writes rope_parameters.
    config_path = out / "config.json"
    doc = json.loads(config_path.read_text())
    doc["rope_theta"] = 10000.0
    doc.pop("rope_scaling", None)
    for key in ("original_max_position_embeddings", "head_dim"):
        if key in spec["config"]:
            doc[key] = spec["config"][key]
    config_path.write_text(json.dumps(doc, indent=1))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / f, out / f)
    rotary = getattr(model.model, "rotary_emb", None)
    if rotary is None:
        log.warning("%s: no model.rotary_emb to check rope theta against", arch)
    else:
        expected = 10000.0 ** (-2.0 / (HIDDEN // HEADS))
        if abs(float(rotary.inv_freq[1]) - expected) > 1e-6 * expected:
            raise SystemExit(f"{arch}: transformers' rope theta is not 10000 (inv_freq[1] {float(rotary.inv_freq[1])})")
    return model


def unpermute(w, n_head: int):
    """Inverse of convert_hf_to_gguf.py's LlamaModel.permute for one Q or K matrix of N_HEAD heads."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def load_dequantized(model, arch: str, gguf_path: Path, gguf):
    """The model with every parameter replaced by what GGUF_PATH holds, dequantized by gguf-py, in float64."""
    import numpy as np
    import torch
    from gguf.quants import dequantize

    reader = gguf.GGUFReader(str(gguf_path))
    tensors = {t.name: t for t in reader.tensors}
    arch_id = {"llama": gguf.MODEL_ARCH.LLAMA, "qwen2": gguf.MODEL_ARCH.QWEN2, "gemma": gguf.MODEL_ARCH.GEMMA,
               "phi3": gguf.MODEL_ARCH.PHI3}[arch]
    names = gguf.get_tensor_name_map(arch_id, LAYERS)
    model = model.double()
    used = set()
    with torch.no_grad():
        for hf_name, p in model.named_parameters():
            if hf_name == "lm_head.weight" and model.config.tie_word_embeddings:
                continue
            name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
            if name is None or name not in tensors:
                raise SystemExit(f"{gguf_path}: no tensor for {hf_name} ({name})")
            t = tensors[name]
            values = dequantize(t.data, t.tensor_type).astype(np.float64)
            values = values.reshape([int(d) for d in reversed(t.shape)])
            if arch == "llama" and hf_name.endswith("q_proj.weight"):
                values = unpermute(values, HEADS)
            if arch == "llama" and hf_name.endswith("k_proj.weight"):
                values = unpermute(values, KV_HEADS)
            if arch == "gemma" and hf_name.endswith("norm.weight"):
                values = values - 1.0
            if tuple(values.shape) != tuple(p.shape):
                raise SystemExit(f"{gguf_path}: {name} has shape {values.shape}, {hf_name} is {tuple(p.shape)}")
            p.copy_(torch.from_numpy(values))
            used.add(name)
    left = set(tensors) - used - {"rope_freqs.weight"}
    if left:
        raise SystemExit(f"{gguf_path}: tensors not loaded: {sorted(left)}")
    return {name: t.tensor_type.name for name, t in tensors.items()}


def logits_for(model, ids: list[int]):
    import torch

    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0].double().numpy()


# --- main --------------------------------------------------------------------------------------------------

def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("llama_cpp", type=Path, nargs="?", help="llama.cpp source folder")
    parser.add_argument("out", type=Path)
    parser.add_argument("--tokenizers", type=Path, default=Path(".deps/tokenizers"),
                        help="folder of tokenizer packages (qwen3/, llama3/ with tokenizer.json and "
                             "tokenizer_config.json), or of tokenizers already cut by --cut-tokenizers-only")
    parser.add_argument("--cut-tokenizers-only", action="store_true",
                        help="only write the cut tokenizers into OUT (small enough to carry)")
    parser.add_argument("--archs", default=",".join(ARCHS))
    parser.add_argument("--quants", default=",".join(QUANTS))
    parser.add_argument("--work", type=Path, default=Path("/tmp/gguf-fixtures-work"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    if args.cut_tokenizers_only:
        for name in TOKENIZERS:
            cut_tokenizer(args.tokenizers / name, name, args.out / name)
        return
    if args.llama_cpp is None:
        parser.error("LLAMA_CPP is required")

    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    quantize = build_quantize(args.llama_cpp, args.work / "llama-build")
    convert, gguf = import_converter(args.llama_cpp)
    from tokenizers import Tokenizer

    references = {"generator": "tools/make_gguf_fixtures.py", "vocab_size": VOCAB, "prompts": PROMPTS,
                  "fixtures": []}
    failures = []
    for index, arch in enumerate(args.archs.split(",")):
        spec = ARCHS[arch]
        tokenizer_dir = args.work / "tokenizers" / spec["tokenizer"]
        cut_tokenizer(args.tokenizers / spec["tokenizer"], spec["tokenizer"], tokenizer_dir)
        hf_dir = args.work / f"{arch}-hf"
        f32 = args.work / f"{arch}-f32.gguf"
        try:
            model = make_hf_model(arch, hf_dir, tokenizer_dir, args.seed + index)
            convert_to_gguf(convert, hf_dir, f32, TOKENIZERS[spec["tokenizer"]]["pre"])
        except Exception as e:  # keep going: report every architecture's fate
            log.exception("%s: model or conversion failed", arch)
            failures.append(f"{arch}: {e!r}")
            continue
        tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
        prompt_ids = [tokenizer.encode(p, add_special_tokens=False).ids for p in PROMPTS]
        for quant in args.quants.split(","):
            name = f"{arch}-{quant}"
            try:
                out_file = args.out / f"{name}.gguf"
                subprocess.run([str(quantize), str(f32), str(out_file), quant], check=True,
                               stdout=subprocess.DEVNULL)
                types = load_dequantized(model, arch, out_file, gguf)
                import numpy as np
                rows = [logits_for(model, ids) for ids in prompt_ids]
                np.concatenate(rows).astype("<f4").tofile(args.out / f"{name}.logits.f32")
                references["fixtures"].append({
                    "file": out_file.name, "logits": f"{name}.logits.f32", "architecture": arch,
                    "hf_architecture": type(model).__name__,
                    "quant": quant, "prompt_ids": prompt_ids, "tensor_types": types,
                    "argmax": [[int(i) for i in r.argmax(axis=1)] for r in rows]})
                log.info("%s: %d bytes, types %s", name, out_file.stat().st_size, sorted(set(types.values())))
            except Exception as e:
                log.exception("%s failed", name)
                failures.append(f"{name}: {e!r}")
    references["failures"] = failures
    (args.out / "references.json").write_text(json.dumps(references, indent=1))
    if failures:
        log.error("failures: %s", failures)
        sys.exit(1)


if __name__ == "__main__":
    main()
