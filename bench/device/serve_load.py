#!/usr/bin/env python3
"""Steady load on `gerbil serve`: CLIENTS clients each sending streamed completions one after another for SECONDS,
so that requests arrive while others decode and their prompts are prefilled in steps beside the running sequences
(continuous batching as a busy server sees it, unlike serve_concurrent.py's one wave).

    bench/device/serve_load.py URL CLIENTS SECONDS [TEMPERATURE] [FIELDS] [WORDS] [TOKENS]

Each request has its own prompt (a random WORDS words, default 20-400) and max_tokens (a random TOKENS, default
16-256), TEMPERATURE with a seed of its own, and the request fields of the JSON object FIELDS (default {}). Prints the completion tokens of the requests
that ended within SECONDS over SECONDS, the requests, and the median time to first token. Standard library only.
"""
import http.client
import json
import random
import statistics
import sys
import threading
import time
import urllib.parse

WORDS = "the city river market bridge winter harvest council tower road music school garden harbour".split()


def served_model(url):
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    connection.request("GET", "/v1/models")
    return json.loads(connection.getresponse().read())["data"][0]["id"]


def one_request(url, request):
    """Streams one completion: (completion tokens, seconds to the first token)."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
    start = time.perf_counter()
    connection.request("POST", "/v1/completions", json.dumps(request), {"Content-Type": "application/json"})
    response = connection.getresponse()
    if response.status != 200:
        raise SystemExit(f"{url}: HTTP {response.status}: {response.read()[:500]!r}")
    tokens, first = 0, None
    for line in response:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        event = json.loads(line[6:])
        if first is None and event.get("choices") and event["choices"][0].get("text"):
            first = time.perf_counter() - start
        if event.get("usage"):
            tokens = event["usage"]["completion_tokens"]
    connection.close()
    return tokens, first


def client(url, model, index, deadline, temperature, fields, words, answer, results):
    rng = random.Random(index)
    n = 0
    while True:
        request = {"model": model, "prompt": " ".join(rng.choice(WORDS) for _ in range(rng.randint(*words))),
                   "max_tokens": rng.randint(*answer), "temperature": temperature, "seed": index * 1000 + n,
                   "stream": True, "stream_options": {"include_usage": True}, **fields}
        tokens, first = one_request(url, request)
        if time.perf_counter() > deadline:
            return
        results.append((tokens, first))
        n += 1


def main():
    url, clients, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    temperature = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    fields = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    span = lambda text: tuple(int(n) for n in text.split("-"))  # noqa: E731
    words = span(sys.argv[6]) if len(sys.argv) > 6 else (20, 400)
    answer = span(sys.argv[7]) if len(sys.argv) > 7 else (16, 256)
    model = served_model(url)
    results = []
    deadline = time.perf_counter() + seconds
    threads = [threading.Thread(target=client, args=(url, model, i, deadline, temperature, fields, words, answer,
                                                      results))
               for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tokens = sum(t for t, _ in results)
    firsts = [f for _, f in results if f is not None]
    extra = "".join(f", {key} {value}" for key, value in fields.items())
    print(f"{clients} clients for {seconds:.0f} s, temperature {temperature}{extra}, prompts of {words[0]}-{words[1]} "
          f"words, answers of {answer[0]}-{answer[1]} tokens: {len(results)} requests, "
          f"{tokens} tokens, {tokens / seconds:.1f} tok/s, median time to first token "
          f"{statistics.median(firsts) * 1000 if firsts else float('nan'):.1f} ms")


if __name__ == "__main__":
    main()
