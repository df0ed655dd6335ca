#!/usr/bin/env python3
"""Reference numbers for the tokenizer benchmark on GGUF files: transformers' GGUF tokenizer
conversion time, the load time of the resulting tokenizer.json in `tokenizers` (Rust), and
single-threaded `tokenizers` encode throughput on the same text specd's benchmark uses.

    python3 tools/tokenizer/corpus.py --bench-text > /tmp/input.txt
    RAYON_NUM_THREADS=1 python3 tools/tokenizer/bench_reference.py --input /tmp/input.txt FILE.gguf...

Prints one JSON object per file.
"""
import argparse
import json
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import tokenizers  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402


def timed(fn, repeat):
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("gguf", type=Path, nargs="+")
    args = parser.parse_args()
    text = args.input.read_text(encoding="utf-8")
    for path in args.gguf:
        convert_s, auto = timed(lambda: AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name), 1)
        serialized = auto.backend_tokenizer.to_str()
        load_s, tok = timed(lambda: tokenizers.Tokenizer.from_str(serialized), args.repeat)
        tok.encode(text[:1000], add_special_tokens=False)
        encode_s, enc = timed(lambda: tok.encode(text, add_special_tokens=False), args.repeat)
        lines = text.splitlines(keepends=True)
        lines_s, _ = timed(lambda: [tok.encode(line, add_special_tokens=False) for line in lines], args.repeat)
        print(json.dumps({
            "file": path.name, "tokenizers": tokenizers.__version__, "transformers": transformers.__version__,
            "transformers_gguf_conversion_ms": convert_s * 1e3, "tokenizers_load_ms": load_s * 1e3,
            "input_bytes": len(text.encode("utf-8")), "tokens": len(enc.ids),
            "encode_mb_per_s": len(text.encode("utf-8")) / encode_s / 1e6,
            "encode_tokens_per_s": len(enc.ids) / encode_s,
            "encode_by_line_mb_per_s": len(text.encode("utf-8")) / lines_s / 1e6}))


if __name__ == "__main__":
    main()
