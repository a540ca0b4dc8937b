#!/usr/bin/env python3
"""Checks the long-position references (tests/data/long, made by tools/make_long_references.py's NumPy float64
transcription) against Hugging Face transformers itself, in float64: each model's 1,100-token prompt through
AutoModelForCausalLM in float64 (eager attention), the last positions' logits and every greedy step's logits
compared with the stored float32 references. Prints one JSON line per model with the largest relative error per
row (L2 norm of the difference over the reference's, the tests' measure) and whether every argmax agrees; exits
non-zero when an error passes --bound. Needs torch and transformers (the H200 machine has them):

    python3 tools/check_long_references.py [--data tests/data/long] [--bound 1e-5]
"""
import argparse
import json
import pathlib
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM


def rows(path, shape):
    return np.fromfile(path, dtype="<f4").reshape(shape).astype(np.float64)


def relative_errors(got, want):
    return [float(np.linalg.norm(g - w) / np.linalg.norm(w)) for g, w in zip(got, want)]


def check(folder):
    meta = json.loads((folder / "ref" / "meta.json").read_text())
    ids = json.loads((folder / "ref" / "input_ids.json").read_text())
    greedy = json.loads((folder / "ref" / "greedy.json").read_text())
    model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float64, attn_implementation="eager").eval()
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].numpy()
        first = meta["logits_first_position"]
        want = rows(folder / "ref" / meta["logits_file"], meta["logits_shape"])
        prompt_errors = relative_errors(logits[first:first + len(want)], want)
        argmax_ok = all(int(np.argmax(g)) == int(np.argmax(w)) for g, w in zip(logits[first:], want))
        want_steps = rows(folder / "ref" / meta["greedy_logits_file"], meta["greedy_logits_shape"])
        sequence, step_errors = list(ids), []
        for i, new_id in enumerate(greedy["new_ids"]):
            step = model(torch.tensor([sequence])).logits[0, -1].numpy()
            step_errors += relative_errors([step], [want_steps[i]])
            argmax_ok &= int(np.argmax(step)) == int(new_id)
            sequence.append(new_id)
    return {"model": folder.name, "prompt_rows_max_error": max(prompt_errors), "greedy_steps_max_error": max(step_errors),
            "argmax_agrees": argmax_ok}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="tests/data/long", type=pathlib.Path)
    parser.add_argument("--bound", default=1e-5, type=float)
    args = parser.parse_args()
    failed = False
    for folder in sorted(p for p in args.data.iterdir() if (p / "config.json").exists()):
        result = check(folder)
        worst = max(result["prompt_rows_max_error"], result["greedy_steps_max_error"])
        result["within_bound"] = worst <= args.bound and result["argmax_agrees"]
        failed |= not result["within_bound"]
        print(json.dumps(result), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
