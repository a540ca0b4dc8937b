#!/usr/bin/env python3
"""Times Hugging Face transformers on a model folder the way `gerbil bench model` times gerbil.

float16 weights, sdpa attention, batch 1, greedy decoding with the KV cache:
  pp<P>  prefill of a P-token prompt (one forward pass), tokens per second
  tg<G>  G generated tokens after a 1-token prompt (model.generate, greedy, no early stop), tokens per second
Each figure is the median of --repeats runs after one warm-up. Prints one JSON object.

With --from-config (or when the folder has no weights) the model is built from config.json with random
weights directly on the GPU: same shapes and speed, no file to load.
"""
import argparse
import json
import pathlib
import statistics
import time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM


def timed(fn, repeats):
    fn()  # warm-up
    seconds = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="Hugging Face model folder (config.json [+ safetensors])")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--generated-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--from-config", action="store_true", help="random weights built on the GPU")
    args = parser.parse_args()

    folder = pathlib.Path(args.model)
    has_weights = any(folder.glob("*.safetensors"))
    kwargs = dict(dtype=torch.float16, attn_implementation="sdpa")
    if has_weights and not args.from_config:
        model = AutoModelForCausalLM.from_pretrained(folder, **kwargs).to("cuda")
    else:
        config = AutoConfig.from_pretrained(folder)
        with torch.device("cuda"):
            model = AutoModelForCausalLM.from_config(config, **kwargs)
    model.eval()
    vocab = model.config.vocab_size
    prompt = torch.randint(0, vocab, (1, args.prompt_tokens), device="cuda")
    first = prompt[:, :1]

    @torch.no_grad()
    def prefill():
        model(prompt, use_cache=True)

    @torch.no_grad()
    def generate():
        model.generate(first, max_new_tokens=args.generated_tokens, min_new_tokens=args.generated_tokens,
                       do_sample=False, use_cache=True, pad_token_id=0)

    pp, pp_all = timed(prefill, args.repeats)
    tg, tg_all = timed(generate, args.repeats)
    print(json.dumps({
        "engine": "transformers", "version": transformers.__version__, "torch": torch.__version__,
        "device": torch.cuda.get_device_name(), "model": str(folder), "weights": "float16", "attention": "sdpa",
        "random_weights": not (has_weights and not args.from_config),
        "results": [
            {"test": f"pp{args.prompt_tokens}", "median_seconds": pp, "seconds": pp_all,
             "tokens_per_second": args.prompt_tokens / pp},
            {"test": f"tg{args.generated_tokens}", "median_seconds": tg, "seconds": tg_all,
             "tokens_per_second": args.generated_tokens / tg},
        ],
    }, indent=2))


if __name__ == "__main__":
    main()
