#!/usr/bin/env python3
"""Long-position references for tests/test_graph_long_positions.cpp: tiny random-weight models and their
float64 logits over a prompt of 1,100 tokens.

The fixtures in ../shared/fixtures (transformers 5.17, float64) are 20 tokens long. These prompts run past
the split-KV attention threshold (more keys than one 128-key chunk), past a 64-token sliding window many
times over, and past 1,000 positions; two models stretch their rotary embedding past the context they state as
their original one, by YaRN (Qwen2) and by LongRoPE with a partial rotary dimension (Phi-3, as Phi-3.5 and
Phi-4-mini do).

The logits come from a float64 NumPy transcription of transformers' Qwen2, Mistral, Gemma3 and Phi-3 forward
passes (this machine has no torch). Before it writes anything it checks that transcription against the
transformers references of the 20-token fixtures of the same architectures (qwen2-tiny, mistral-swa-tiny,
gemma3-tiny, whose sliding window of 8 is shorter than their prompt, phi3-tiny) and records the agreement in each
meta.json; the fixtures have no rope scaling, so tools/check_long_references.py runs transformers itself on the
results (the device machine has torch). It computes everything in float64, the
rotary angles too, where transformers rounds those (and the softmax and some norm statistics) to float32.

The weights follow the fixtures' recipe (../shared/fixtures/README.md): norm weights around 1 (Gemma's stored
as the offset from 1), biases 0.05 * randn, linear weights large enough that the logits are far from
uniform, and in tied models a zero-mean final norm. q/k projections are twice the others so that attention
over a thousand keys is not nearly uniform: a lost or misplaced block of keys then shows.

For each model, under OUT/<name>/:
  config.json, model.safetensors      the checkpoint (float32)
  ref/input_ids.json                  the prompt: PROMPT_TOKENS random ids
  ref/logits.f32                      [LAST_ROWS, vocab] little-endian float32: the prompt's last LAST_ROWS
                                      rows of one causal forward (row r is position PROMPT_TOKENS - LAST_ROWS + r)
  ref/greedy.json                     {"new_ids": GREEDY_TOKENS argmax tokens after the whole prompt}
  ref/greedy_logits.f32               [GREEDY_TOKENS, vocab]: row i = logits at the last position of
                                      prompt + new_ids[:i] (full recompute), so new_ids[i] = argmax(row i)
  ref/meta.json                       shapes, margins, self-checks and the sha256 of every file

  python3 tools/make_long_references.py --fixtures ../shared/fixtures --out tests/data/long [--models NAME ...]
(NumPy needed: Debian's python3-numpy.)
"""
import argparse
import hashlib
import json
import math
import os
import shutil
import struct

import numpy as np

PROMPT_TOKENS = 1100
LAST_ROWS = 16
GREEDY_TOKENS = 8
# Prompts are drawn again (next seed) until every checked row's best logit leads the second by this much,
# so a correct engine's rounding cannot legitimately flip an argmax the test asserts.
MIN_MARGIN = 0.01
# The transcription must reproduce transformers' fixture logits this closely (relative L2 per row; what
# transformers' own float32 pieces allow).
FIXTURE_BOUND = 1e-5
FIXTURES_CHECKED = ["qwen2-tiny", "mistral-swa-tiny", "gemma3-tiny", "phi3-tiny"]

COMMON = {
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "head_dim": 16,
    "max_position_embeddings": 2048,
    "attention_dropout": 0.0,
    "initializer_range": 0.02,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
    "use_cache": True,
    "dtype": "float32",
}

# GQA, q/k/v biases, tied embeddings, every layer full attention.
QWEN2 = dict(
    COMMON,
    architectures=["Qwen2ForCausalLM"],
    model_type="qwen2",
    num_key_value_heads=2,
    hidden_act="silu",
    rms_norm_eps=1e-6,
    rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"},
    tie_word_embeddings=True,
    attention_bias=True,
    use_sliding_window=False,
    sliding_window=None,
    max_window_layers=28,
    layer_types=["full_attention", "full_attention"],
)

# Configs as transformers writes them for these architectures (the fixtures' fields), and a seed each.
MODELS = {
    "qwen2-long": (101, QWEN2),
    # MQA, untied, a 64-token sliding window on every layer.
    "mistral-swa-long": (202, dict(
        COMMON,
        architectures=["MistralForCausalLM"],
        model_type="mistral",
        num_key_value_heads=1,
        hidden_act="silu",
        rms_norm_eps=1e-5,
        rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
        tie_word_embeddings=False,
        sliding_window=64,
    )),
    # A sliding layer then a full one, each with its rotary base; q/k norms, pre/post norms, tied.
    "gemma3-long": (303, dict(
        COMMON,
        architectures=["Gemma3ForCausalLM"],
        model_type="gemma3_text",
        num_key_value_heads=2,
        hidden_activation="gelu_pytorch_tanh",
        rms_norm_eps=1e-6,
        query_pre_attn_scalar=24,
        rope_parameters={
            "full_attention": {"rope_theta": 1000000.0, "rope_type": "default"},
            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
        },
        sliding_window=64,
        layer_types=["sliding_attention", "full_attention"],
        attention_bias=False,
        attn_logit_softcapping=None,
        final_logit_softcapping=None,
        use_bidirectional_attention=False,
        tie_word_embeddings=True,
    )),
    # YaRN: an original context of 512 stretched 4 times (to max_position_embeddings, so that transformers'
    # versions that take the factor as that ratio agree). With rotary dim 16 and base 10000 frequencies 0 to 4
    # form the ramp between kept and divided ones; cos and sin are scaled by 0.1 ln 4 + 1.
    "qwen2-yarn-long": (505, dict(
        QWEN2,
        rope_parameters={"rope_theta": 10000.0, "rope_type": "yarn", "factor": 4.0,
                         "original_max_position_embeddings": 512},
    )),
    # LongRoPE as Phi-3.5 / Phi-4-mini have it: an original context of 256 (its prompt of 1,100 is past it, so
    # the long factors apply), 8 times that as max_position_embeddings (attention factor
    # sqrt(1 + ln 8 / ln 256)), and a rotary dimension of 12 of 16 (partial_rotary_factor 0.75): 6 factors each.
    "phi3-longrope-long": (606, dict(
        COMMON,
        architectures=["Phi3ForCausalLM"],
        model_type="phi3",
        num_key_value_heads=2,
        hidden_act="silu",
        rms_norm_eps=1e-5,
        original_max_position_embeddings=256,
        rope_parameters={"rope_theta": 10000.0, "rope_type": "longrope", "partial_rotary_factor": 0.75,
                         "original_max_position_embeddings": 256,
                         "short_factor": [1.0, 1.02, 1.1, 1.25, 1.5, 1.8],
                         "long_factor": [1.0, 1.4, 2.5, 5.0, 9.0, 14.0]},
        tie_word_embeddings=False,
        attention_bias=False,
        sliding_window=None,
        embd_pdrop=0.0,
        resid_pdrop=0.0,
    )),
}


# --- safetensors (float32 only) -------------------------------------------------------------------------

def write_safetensors(path, tensors):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, array in tensors.items():
        size = array.size * 4
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for array in tensors.values():
            f.write(np.ascontiguousarray(array, dtype="<f4").tobytes())


def read_safetensors(path):
    data = open(path, "rb").read()
    length = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + length])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {info['dtype']}; only F32 checkpoints are read")
        start, end = info["data_offsets"]
        out[name] = np.frombuffer(data, "<f4", (end - start) // 4, 8 + length + start).reshape(info["shape"])
    return out


# --- the forward pass, after transformers' modeling_qwen2 / modeling_mistral / modeling_gemma3 -------------

def rope_frequencies(rope, config, rotary_dim, positions):
    """Inverse frequencies and the factor scaling cos and sin, after transformers' modeling_rope_utils: default,
    yarn (_compute_yarn_parameters) and longrope (_compute_longrope_parameters, its long factors once the
    sequence passes the original context, as transformers' dynamic update chooses them)."""
    base = rope["rope_theta"]
    inv = 1.0 / base ** (np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)
    kind = rope["rope_type"]
    untranscribed = {"attention_factor", "mscale", "mscale_all_dim", "truncate"} & set(rope)
    if untranscribed or rope.get("factor", 2) <= 1:
        raise SystemExit(f"rope parameters {sorted(untranscribed)} or a factor of at most 1 are not transcribed here")
    if kind == "default":
        return inv, 1.0
    if kind == "yarn":
        factor, original = rope["factor"], rope.get("original_max_position_embeddings", config["max_position_embeddings"])
        index_of = lambda turns: rotary_dim * math.log(original / (turns * 2 * math.pi)) / (2 * math.log(base))
        low = max(math.floor(index_of(rope.get("beta_fast", 32))), 0)
        high = min(math.ceil(index_of(rope.get("beta_slow", 1))), rotary_dim - 1)
        high = high + 0.001 if high == low else high
        ramp = np.clip((np.arange(rotary_dim // 2) - low) / (high - low), 0, 1)
        return inv / factor * ramp + inv * (1 - ramp), 0.1 * math.log(factor) + 1
    if kind == "longrope":
        original = config["original_max_position_embeddings"]
        factor = config["max_position_embeddings"] / original
        factors = rope["long_factor"] if positions.max() + 1 > original else rope["short_factor"]
        return inv / np.asarray(factors, np.float64), math.sqrt(1 + math.log(factor) / math.log(original))
    raise SystemExit(f"rope_type {kind} is not transcribed here")


def rotary_tables(rope, config, rotary_dim, positions):
    inv_freq, scale = rope_frequencies(rope, config, rotary_dim, positions)
    angles = positions[:, None].astype(np.float64) * inv_freq[None, :]
    angles = np.concatenate([angles, angles], axis=1)  # transformers' rotate_half layout
    return scale * np.cos(angles), scale * np.sin(angles)


def rotate(x, cos, sin):  # x [heads, T, D]: its first cos.shape[-1] dims rotate, the rest pass
    r = cos.shape[-1]
    rot, rest = x[..., :r], x[..., r:]
    rotated_half = np.concatenate([-rot[..., r // 2:], rot[..., :r // 2]], axis=-1)
    return np.concatenate([rot * cos + rotated_half * sin, rest], axis=-1)


def rms_norm(x, weight, eps, gemma):
    normed = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return normed * (1.0 + weight) if gemma else normed * weight


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1.0 + np.exp(-x))


class Reference:
    """One model folder (config.json + float32 model.safetensors), evaluated in float64."""

    def __init__(self, folder):
        self.config = json.load(open(os.path.join(folder, "config.json")))
        self.w = {k: v.astype(np.float64) for k, v in read_safetensors(os.path.join(folder, "model.safetensors")).items()}
        c = self.config
        self.gemma = c["model_type"] == "gemma3_text"
        self.phi3 = c["model_type"] == "phi3"  # fused qkv_proj and gate_up_proj
        if c["model_type"] not in ("qwen2", "mistral", "gemma3_text", "phi3"):
            raise SystemExit(f"{folder}: model_type {c['model_type']} is not transcribed here")
        self.heads, self.kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
        self.head_dim = c.get("head_dim") or c["hidden_size"] // self.heads
        layers = c["num_hidden_layers"]
        default_kind = "sliding_attention" if c.get("sliding_window") and c["model_type"] == "mistral" else "full_attention"
        self.layer_types = c.get("layer_types") or [default_kind] * layers
        self.scale = (c["query_pre_attn_scalar"] if self.gemma else self.head_dim) ** -0.5

    def rope(self, kind):
        rope = self.config["rope_parameters"]
        return rope.get(kind, rope)

    def attention(self, prefix, x, positions, kind):
        c, T, D = self.config, x.shape[0], self.head_dim

        def project(name, heads):
            if self.phi3:  # rows of qkv_proj: q heads, then k, then v
                q_rows, kv_rows = self.heads * D, self.kv_heads * D
                start = {"q": 0, "k": q_rows, "v": q_rows + kv_rows}[name]
                weight = self.w[f"{prefix}.self_attn.qkv_proj.weight"][start:start + heads * D]
            else:
                weight = self.w[f"{prefix}.self_attn.{name}_proj.weight"]
            y = x @ weight.T
            bias = self.w.get(f"{prefix}.self_attn.{name}_proj.bias")
            if bias is not None:
                y = y + bias
            y = y.reshape(T, heads, D).transpose(1, 0, 2)  # [heads, T, D]
            norm = self.w.get(f"{prefix}.self_attn.{name}_norm.weight")
            return y if norm is None else rms_norm(y, norm, c["rms_norm_eps"], self.gemma)

        q, k, v = project("q", self.heads), project("k", self.kv_heads), project("v", self.kv_heads)
        rope = self.rope(kind)
        rotary_dim = int(D * rope.get("partial_rotary_factor", 1.0))
        cos, sin = rotary_tables(rope, c, rotary_dim, positions)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        group = self.heads // self.kv_heads
        k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
        scores = q @ k.transpose(0, 2, 1) * self.scale  # [heads, T, T]
        i, j = positions[:, None], positions[None, :]
        allowed = j <= i
        if kind == "sliding_attention":
            allowed &= j > i - c["sliding_window"]
        scores = np.where(allowed[None], scores, -np.inf)
        scores -= scores.max(axis=-1, keepdims=True)
        p = np.exp(scores)
        p /= p.sum(axis=-1, keepdims=True)
        out = (p @ v).transpose(1, 0, 2).reshape(T, self.heads * D)
        return out @ self.w[f"{prefix}.self_attn.o_proj.weight"].T

    def mlp(self, prefix, x):
        act = gelu_tanh if self.gemma else silu
        if self.phi3:  # gate_up_proj: the gate's rows, then the up projection's
            gate, up = np.split(x @ self.w[f"{prefix}.mlp.gate_up_proj.weight"].T, 2, axis=-1)
        else:
            gate = x @ self.w[f"{prefix}.mlp.gate_proj.weight"].T
            up = x @ self.w[f"{prefix}.mlp.up_proj.weight"].T
        return (act(gate) * up) @ self.w[f"{prefix}.mlp.down_proj.weight"].T

    def logits(self, ids, positions=None):
        """Every position's next-token logits [T, vocab]; `positions` (default 0..T-1) for a suffix."""
        c, eps = self.config, self.config["rms_norm_eps"]
        positions = np.arange(len(ids)) if positions is None else np.asarray(positions)
        norm = lambda h, name: rms_norm(h, self.w[name], eps, self.gemma)
        h = self.w["model.embed_tokens.weight"][np.asarray(ids)]
        if self.gemma:
            h = h * math.sqrt(c["hidden_size"])
        for l, kind in enumerate(self.layer_types):
            p = f"model.layers.{l}"
            attn = self.attention(p, norm(h, f"{p}.input_layernorm.weight"), positions, kind)
            if self.gemma:
                h = h + norm(attn, f"{p}.post_attention_layernorm.weight")
                h = h + norm(self.mlp(p, norm(h, f"{p}.pre_feedforward_layernorm.weight")),
                             f"{p}.post_feedforward_layernorm.weight")
            else:
                h = h + attn
                h = h + self.mlp(p, norm(h, f"{p}.post_attention_layernorm.weight"))
        head = self.w.get("lm_head.weight", self.w["model.embed_tokens.weight"])
        return norm(h, "model.norm.weight") @ head.T


# --- checks and generation ---------------------------------------------------------------------------------

def relative_errors(got, want):
    return np.sqrt(((got - want) ** 2).sum(-1) / (want ** 2).sum(-1))


def check_fixtures(fixtures):
    """The transcription against transformers' own float64 logits of the 20-token fixtures."""
    results = {}
    for name in FIXTURES_CHECKED:
        folder = os.path.join(fixtures, name)
        ids = json.load(open(os.path.join(folder, "ref", "input_ids.json")))
        want = np.fromfile(os.path.join(folder, "ref", "logits.f32"), "<f4").reshape(len(ids), -1)
        worst = float(relative_errors(Reference(folder).logits(ids), want).max())
        results[name] = worst
        print(f"fixture {name}: largest relative error against transformers {worst:.2e}", flush=True)
        if not worst < FIXTURE_BOUND:
            raise SystemExit(f"the transcription disagrees with transformers on {name}: {worst:.2e}")
    return results


def randomize(config, rng):
    """The fixtures' recipe for every tensor of the architecture, in transformers' names."""
    hidden, inter, D = config["hidden_size"], config["intermediate_size"], config["head_dim"]
    q_out, kv_out = config["num_attention_heads"] * D, config["num_key_value_heads"] * D
    gemma, tied = config["model_type"] == "gemma3_text", config["tie_word_embeddings"]
    randn = lambda *shape: rng.standard_normal(shape)
    norm = lambda size, final=False: (randn(size) if final and tied else 1.0 + 0.1 * randn(size)) - (1.0 if gemma else 0.0)
    linear = lambda out, inp, gain=0.7: gain / math.sqrt(inp) * randn(out, inp)
    t = {"model.embed_tokens.weight": (0.25 if gemma else 0.4) * randn(config["vocab_size"], hidden)}
    for l in range(config["num_hidden_layers"]):
        p = f"model.layers.{l}"
        t[f"{p}.input_layernorm.weight"] = norm(hidden)
        t[f"{p}.post_attention_layernorm.weight"] = norm(hidden)
        if gemma:
            t[f"{p}.pre_feedforward_layernorm.weight"] = norm(hidden)
            t[f"{p}.post_feedforward_layernorm.weight"] = norm(hidden)
            t[f"{p}.self_attn.q_norm.weight"] = norm(D)
            t[f"{p}.self_attn.k_norm.weight"] = norm(D)
        for name, out, gain in (("q", q_out, 1.4), ("k", kv_out, 1.4), ("v", kv_out, 0.7)):
            t[f"{p}.self_attn.{name}_proj.weight"] = linear(out, hidden, gain)
            if config.get("attention_bias") and not gemma:
                t[f"{p}.self_attn.{name}_proj.bias"] = 0.05 * randn(out)
        t[f"{p}.self_attn.o_proj.weight"] = linear(hidden, q_out)
        t[f"{p}.mlp.gate_proj.weight"] = linear(inter, hidden)
        t[f"{p}.mlp.up_proj.weight"] = linear(inter, hidden)
        if config["model_type"] == "phi3":  # the same draws, stored fused as Phi-3 keeps them
            t[f"{p}.self_attn.qkv_proj.weight"] = np.concatenate(
                [t.pop(f"{p}.self_attn.{name}_proj.weight") for name in ("q", "k", "v")])
            t[f"{p}.mlp.gate_up_proj.weight"] = np.concatenate(
                [t.pop(f"{p}.mlp.{name}_proj.weight") for name in ("gate", "up")])
        t[f"{p}.mlp.down_proj.weight"] = linear(hidden, inter)
    t["model.norm.weight"] = norm(hidden, final=True)
    if not tied:
        t["lm_head.weight"] = 2.5 / math.sqrt(hidden) * randn(config["vocab_size"], hidden)
    return {k: v.astype(np.float32) for k, v in sorted(t.items())}


def margins(rows):
    top = np.sort(rows, axis=-1)
    return top[:, -1] - top[:, -2]


def greedy(model, prompt):
    """Each step a full recompute over prompt + the tokens so far (lowest index on exact ties)."""
    sequence, rows = list(prompt), []
    for _ in range(GREEDY_TOKENS):
        rows.append(model.logits(sequence)[-1])
        sequence.append(int(np.argmax(rows[-1])))
    return sequence[len(prompt):], np.stack(rows)


def window_diff(model, ids, rows):
    """When every layer slides, the last rows see only the last layers * (window - 1) tokens before them:
    that suffix alone, at its true positions, must give the same rows (else the window is not applied)."""
    c = model.config
    keep = LAST_ROWS + c["num_hidden_layers"] * (c["sliding_window"] - 1)
    suffix = model.logits(ids[-keep:], np.arange(len(ids) - keep, len(ids)))[-LAST_ROWS:]
    return float(np.abs(suffix - rows).max())


def first_chunk_sensitivity(model, ids, rows):
    """How much the last rows change when the first 128 keys (one split-KV chunk) are dropped: the size of
    the error an engine that lost them would show."""
    suffix = model.logits(ids[128:], np.arange(128, len(ids)))[-LAST_ROWS:]
    return float(relative_errors(suffix, rows).min())


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def build(name, seed, config, out, fixture_check):
    folder = os.path.join(out, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "ref"))
    json.dump(config, open(os.path.join(folder, "config.json"), "w"), indent=2, sort_keys=True)
    write_safetensors(os.path.join(folder, "model.safetensors"), randomize(config, np.random.default_rng(seed)))
    model = Reference(folder)  # reads the stored float32 weights back, upcast exactly
    vocab = config["vocab_size"]

    for attempt in range(100):
        ids = [int(i) for i in np.random.default_rng([seed, attempt]).integers(3, vocab, PROMPT_TOKENS)]
        rows = model.logits(ids)[-LAST_ROWS:]
        if margins(rows).min() < MIN_MARGIN:
            continue
        new_ids, greedy_rows = greedy(model, ids)
        if margins(greedy_rows).min() >= MIN_MARGIN:
            break
    else:
        raise SystemExit(f"{name}: no prompt in 100 with top-1/top-2 margins of at least {MIN_MARGIN}")

    checks = {"prompt_attempt": attempt, "fixtures_largest_relative_error_vs_transformers": fixture_check}
    if all(kind == "sliding_attention" for kind in model.layer_types):
        checks["window_suffix_vs_full_prompt_max_abs_diff"] = window_diff(model, ids, rows)
        assert checks["window_suffix_vs_full_prompt_max_abs_diff"] < 1e-9, checks
    else:
        checks["first_128_keys_dropped_smallest_relative_change"] = first_chunk_sensitivity(model, ids, rows)

    ref = os.path.join(folder, "ref")
    json.dump(ids, open(os.path.join(ref, "input_ids.json"), "w"))
    rows.astype("<f4").tofile(os.path.join(ref, "logits.f32"))
    json.dump({"new_ids": new_ids}, open(os.path.join(ref, "greedy.json"), "w"))
    greedy_rows.astype("<f4").tofile(os.path.join(ref, "greedy_logits.f32"))
    all_rows = np.concatenate([rows, greedy_rows])
    meta = {
        "format_version": 1,
        "architecture": config["architectures"][0],
        "reference": f"tools/make_long_references.py: NumPy {np.__version__} float64 transcription of "
                     "transformers' forward pass, checked against the transformers 5.17 float64 fixtures "
                     f"{FIXTURES_CHECKED} (checks.fixtures_largest_relative_error_vs_transformers); every "
                     "step in float64, rotary angles included",
        "seed": seed,
        "num_tokens": PROMPT_TOKENS,
        "vocab_size": vocab,
        "logits_file": "logits.f32",
        "logits_shape": [LAST_ROWS, vocab],
        "logits_first_position": PROMPT_TOKENS - LAST_ROWS,
        "logits_layout": "row-major little-endian float32; row r = next-token logits at position "
                         "logits_first_position + r of one causal forward over the whole prompt (no BOS added)",
        "greedy_file": "greedy.json",
        "greedy_new_tokens": GREEDY_TOKENS,
        "greedy_logits_file": "greedy_logits.f32",
        "greedy_logits_shape": [GREEDY_TOKENS, vocab],
        "greedy_logits_layout": "row i = logits at the last position of prompt + new_ids[:i] (full recompute); "
                                "new_ids[i] = argmax(row i), lowest index on ties, no EOS stop",
        "stats": {
            "logits_std": float(all_rows.std()),
            "logits_abs_max": float(np.abs(all_rows).max()),
            "prompt_top1_top2_margins": [round(float(m), 6) for m in margins(rows)],
            "greedy_top1_top2_margins": [round(float(m), 6) for m in margins(greedy_rows)],
        },
        "checks": checks,
        "sha256": {},
    }
    for relative in ("config.json", "model.safetensors", "ref/input_ids.json", "ref/logits.f32", "ref/greedy.json",
                     "ref/greedy_logits.f32"):
        meta["sha256"][relative] = sha256(os.path.join(folder, relative))
    json.dump(meta, open(os.path.join(ref, "meta.json"), "w"), indent=1)
    print(name, json.dumps(meta["stats"]), json.dumps(checks), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder to write the <model>/ folders into")
    parser.add_argument("--fixtures", required=True, help="the transformers fixtures (../shared/fixtures)")
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS),
                        help="build only these (the others' folders are left as they are)")
    args = parser.parse_args()
    fixture_check = check_fixtures(args.fixtures)
    for name in args.models:
        seed, config = MODELS[name]
        build(name, seed, config, args.out, fixture_check)


if __name__ == "__main__":
    main()
