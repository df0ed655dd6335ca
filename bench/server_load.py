#!/usr/bin/env python3
"""Loopback load and latency tests for `specd serve` (Python standard library only).

  load:    N concurrent streaming clients for S seconds. Reports throughput, time to first token
           and per-token latency percentiles, errors and the server's RSS before and after.
  latency: R requests one after another with one prompt. Reports the median time to first token
           and the median decode rate the client sees ((tokens - 1) / (last chunk - first chunk)),
           the numbers to set beside `specd generate` on the same prompt.

One JSON object is printed on stdout.

  python3 bench/server_load.py load --url http://127.0.0.1:PORT/v1 --model NAME [--pid PID]
      [--concurrency 64] [--seconds 60] [--max-tokens 64] [--temperature 0] [--key KEY]
  python3 bench/server_load.py latency --url ... --model NAME --prompt TEXT [--requests 10]
      [--max-tokens 128]
"""
import argparse
import http.client
import json
import re
import sys
import threading
import time
import urllib.parse

PROMPTS = ["def fibonacci(n):\n", "import os\n\ndef list_files(path):\n", "class Stack:\n",
           "def is_prime(n):\n", "def merge_sort(items):\n", "def read_json(path):\n",
           "async def fetch(url):\n", "def gcd(a, b):\n"]


def rss_bytes(pid):
    if not pid:
        return None
    with open(f"/proc/{pid}/status") as f:
        match = re.search(r"VmRSS:\s+(\d+) kB", f.read())
    return int(match.group(1)) * 1024 if match else None


def percentile(values, p):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def median(values):
    return percentile(values, 0.5)


def stream_completion(url, args, prompt, seed, timeout=120):
    """Sends one streaming completion; returns (start, first_chunk, end, completion_tokens)."""
    body = json.dumps({"model": args.model, "prompt": prompt, "max_tokens": args.max_tokens,
                       "stream": True, "temperature": args.temperature, "seed": seed,
                       "stream_options": {"include_usage": True}})
    headers = {"Content-Type": "application/json"}
    if args.key:
        headers["Authorization"] = f"Bearer {args.key}"
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    try:
        start = time.perf_counter()
        connection.request("POST", url.path.rstrip("/") + "/completions", body, headers)
        response = connection.getresponse()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {response.read()[:200]!r}")
        first, tokens, done = None, 0, False
        for raw in response:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data: "):
                continue
            data = line[len("data: "):]
            if data == "[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if "error" in chunk:
                raise RuntimeError(chunk["error"].get("message", "error chunk"))
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            if first is None and chunk.get("choices") and chunk["choices"][0].get("text"):
                first = time.perf_counter()
        end = time.perf_counter()
        if not done:
            raise RuntimeError("stream ended without [DONE]")
        return start, first, end, tokens
    finally:
        connection.close()


def run_load(url, args):
    lock = threading.Lock()
    stats = {"requests": 0, "errors": 0, "tokens": 0, "ttft": [], "per_token": [], "samples": []}
    counter = iter(range(1 << 62))
    rss_before = rss_bytes(args.pid)
    began = time.perf_counter()
    deadline = began + args.seconds

    def worker():
        while time.perf_counter() < deadline:
            with lock:
                i = next(counter)
            try:
                start, first, end, tokens = stream_completion(url, args, PROMPTS[i % len(PROMPTS)], i)
                with lock:
                    stats["requests"] += 1
                    stats["tokens"] += tokens
                    if first is not None:
                        stats["ttft"].append(first - start)
                        if tokens > 1:
                            stats["per_token"].append((end - first) / (tokens - 1))
            except Exception as error:  # counted and sampled, the run goes on
                with lock:
                    stats["errors"] += 1
                    if len(stats["samples"]) < 5:
                        stats["samples"].append(str(error))

    threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    return {"concurrency": args.concurrency, "seconds_requested": args.seconds,
            "seconds_elapsed": elapsed, "max_tokens": args.max_tokens,
            "temperature": args.temperature, "requests": stats["requests"],
            "errors": stats["errors"], "error_samples": stats["samples"],
            "generated_tokens": stats["tokens"], "tokens_per_second": stats["tokens"] / elapsed,
            "ttft_p50_s": percentile(stats["ttft"], 0.5),
            "ttft_p99_s": percentile(stats["ttft"], 0.99),
            "per_token_p50_s": percentile(stats["per_token"], 0.5),
            "per_token_p99_s": percentile(stats["per_token"], 0.99),
            "rss_before_bytes": rss_before, "rss_after_bytes": rss_bytes(args.pid)}


def run_latency(url, args):
    ttft, decode, tokens_seen = [], [], []
    for i in range(args.requests):
        start, first, end, tokens = stream_completion(url, args, args.prompt, 1)
        if first is None or tokens < 2:
            raise RuntimeError("the request produced fewer than 2 tokens")
        ttft.append(first - start)
        decode.append((tokens - 1) / (end - first))
        tokens_seen.append(tokens)
    return {"requests": args.requests, "max_tokens": args.max_tokens,
            "completion_tokens": tokens_seen, "ttft_median_s": median(ttft),
            "ttft_s": ttft, "decode_tok_s_median": median(decode), "decode_tok_s": decode}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["load", "latency"])
    parser.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8080/v1")
    parser.add_argument("--model", required=True)
    parser.add_argument("--key", default="")
    parser.add_argument("--pid", type=int, default=0, help="server process, for its RSS")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--prompt", default=PROMPTS[0])
    parser.add_argument("--requests", type=int, default=10)
    args = parser.parse_args()
    url = urllib.parse.urlparse(args.url)
    if url.hostname not in ("127.0.0.1", "localhost"):
        sys.exit("loopback only")
    args.concurrency = min(256, max(1, args.concurrency))
    args.seconds = min(600.0, max(1.0, args.seconds))
    args.requests = min(1000, max(1, args.requests))
    result = run_load(url, args) if args.mode == "load" else run_latency(url, args)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
