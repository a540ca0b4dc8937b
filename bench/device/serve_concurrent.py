#!/usr/bin/env python3
"""Aggregate decoding speed of CLIENTS sequences streamed through `gerbil serve` at once (started with
`--parallel CLIENTS`): the batched step's throughput as a server's clients see it.

    bench/device/serve_concurrent.py URL CLIENTS [MAX_TOKENS] [TEMPERATURE] [SCHEMA|null] [FIELDS]

Each client sends one streamed completion (its own short prompt, MAX_TOKENS tokens, TEMPERATURE with a seed of
its own, and the request fields of the JSON object FIELDS, e.g. '{"frequency_penalty": 0.5}') to
URL/v1/completions, constrained to SCHEMA (a JSON schema) where given. Prints the generated tokens
of all clients (from their usage events) over the time from the first request to the last client's end, and
the same again after a warm-up round. Standard library only, so it runs on any machine with Python 3.
"""
import http.client
import json
import sys
import threading
import time
import urllib.parse


def served_model(url):
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    connection.request("GET", "/v1/models")
    return json.loads(connection.getresponse().read())["data"][0]["id"]


def stream_once(url, request, tokens, index):
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
    connection.request("POST", "/v1/completions", json.dumps(request), {"Content-Type": "application/json"})
    response = connection.getresponse()
    if response.status != 200:
        raise SystemExit(f"{url}: HTTP {response.status}: {response.read()[:500]!r}")
    for line in response:
        line = line.strip()
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            event = json.loads(line[6:])
            if event.get("usage"):
                tokens[index] = event["usage"]["completion_tokens"]
    connection.close()


def round_trip(url, model, clients, max_tokens, temperature, schema, fields):
    tokens = [0] * clients
    threads = []
    for i in range(clients):
        request = {"model": model, "prompt": f"Report number {i} on the history of the city begins",
                   "max_tokens": max_tokens, "temperature": temperature, "seed": i, "stream": True,
                   "stream_options": {"include_usage": True}, **fields}
        if schema is not None:
            request["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
        threads.append(threading.Thread(target=stream_once, args=(url, request, tokens, i)))
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(tokens), time.perf_counter() - start


def main():
    url, clients = sys.argv[1], int(sys.argv[2])
    max_tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 128
    temperature = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    schema = json.loads(sys.argv[5]) if len(sys.argv) > 5 else None
    fields = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
    model = served_model(url)
    round_trip(url, model, clients, 8, temperature, schema, fields)  # warm-up: pipelines and graphs of the batch
    tokens, seconds = round_trip(url, model, clients, max_tokens, temperature, schema, fields)
    constrained = " constrained" if schema is not None else ""
    extra = "".join(f", {key} {value}" for key, value in fields.items())
    print(f"{clients} clients, temperature {temperature}{constrained}{extra}: {tokens} tokens in {seconds:.2f} s, "
          f"{tokens / seconds:.1f} tok/s")


if __name__ == "__main__":
    main()
