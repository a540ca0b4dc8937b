#!/usr/bin/env python3
"""Decoding speed of one sequence streamed through `gerbil serve`, for comparison with `gerbil bench model`'s
tg128 on the same model in the same call (issue 20: within 5%).

    bench/device/serve_stream.py URL [MAX_TOKENS] [REPEATS] [SCHEMA]

Sends greedy streamed completions (temperature 0, a short prompt) to URL/v1/completions and times the
server-sent events as they arrive: the time to the first content event, and the decode rate between the first
and the last, (tokens - 1) / (t_last - t_first), with the token count from the final usage event. Prints one line per run and the median
rate. With SCHEMA (a JSON schema), each completion is constrained to it (`response_format` json_schema: issue 20
asks constrained decoding within 20 % of unconstrained); a schema whose answers are long, such as
'{"type": "string", "minLength": 100000}', keeps it from ending before MAX_TOKENS. Standard library only, so it
runs on any machine with Python 3.
"""
import http.client
import json
import statistics
import sys
import time
import urllib.parse


def served_model(url):
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    connection.request("GET", "/v1/models")
    return json.loads(connection.getresponse().read())["data"][0]["id"]


def stream_once(url, model, max_tokens, schema=None):
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    request = {"model": model, "prompt": "The history of the city begins", "max_tokens": max_tokens,
               "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    if schema is not None:
        request["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    body = json.dumps(request)
    start = time.perf_counter()
    connection.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    if response.status != 200:
        raise SystemExit(f"{url}: HTTP {response.status}: {response.read()[:500]!r}")
    stamps, tokens = [], 0
    for line in response:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        event = json.loads(line[6:])
        if event.get("usage"):
            tokens = event["usage"]["completion_tokens"]
        if any(choice.get("text") for choice in event.get("choices", [])):
            stamps.append(time.perf_counter())
    connection.close()
    if len(stamps) < 2:
        raise SystemExit(f"{url}: fewer than two tokens streamed")
    return stamps[0] - start, (tokens - 1) / (stamps[-1] - stamps[0]), tokens


def main():
    url = sys.argv[1]
    max_tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    schema = json.loads(sys.argv[4]) if len(sys.argv) > 4 else None
    model = served_model(url)
    stream_once(url, model, 8, schema)  # warm-up: the first request's pipelines and buffers
    rates = []
    for run in range(repeats):
        first, rate, tokens = stream_once(url, model, max_tokens, schema)
        rates.append(rate)
        print(f"run {run}: {tokens} tokens, first after {first * 1000:.1f} ms, {rate:.1f} tok/s")
    constrained = " constrained" if schema is not None else ""
    print(f"streamed{constrained} decode, median of {repeats}: {statistics.median(rates):.1f} tok/s")


if __name__ == "__main__":
    main()
