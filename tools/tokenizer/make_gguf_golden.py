#!/usr/bin/env python3
"""Writes tests/data/tokenizer/gguf_<case>.json: corpus strings with golden ids from
transformers' own GGUF tokenizer conversion (AutoTokenizer.from_pretrained(dir, gguf_file=...)),
never from specd. Same format as make_golden.py, with "gguf" (a file under the source tree) or
"gguf_fetched" (a file under ${SPECD_DATA_DIR:-~/.cache/specd}/gguf/) naming the tokenizer.

Usage:
  python3 tools/gguf/make_spm_fixtures.py            # the tiny GGUF files under tests/data/gguf
  bash tools/gguf/fetch_models.sh gemma3              # the real Gemma-3 270M file
  python3 tools/tokenizer/make_gguf_golden.py [--only NAME,...]

Requires transformers 5.23 (its GGUF tokenizer conversion) and gguf-py.
"""

import argparse
import json
import os
import random
import sys
from pathlib import Path

import transformers
from transformers import AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402
import make_golden  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("SPECD_DATA_DIR", Path.home() / ".cache" / "specd"))

CASES = {
    "gguf_spm_llama": {"gguf": "tests/data/gguf/spm_llama.gguf", "count": 500, "seed": 21},
    "gguf_spm_llama_edge": {"gguf": "tests/data/gguf/spm_llama_edge.gguf", "count": 400, "seed": 22},
    "gguf_spm_phi3": {"gguf": "tests/data/gguf/spm_phi3.gguf", "count": 300, "seed": 24},
    "gguf_spm_gemma": {"gguf": "tests/data/gguf/spm_gemma.gguf", "count": 400, "seed": 23},
    # The real Gemma-3 file on the corpus of the published gemma3 case (same seed).
    "gguf_gemma3": {"gguf_fetched": "gemma3/gemma-3-270m-q4_k_m.gguf", "count": 1200, "seed": 4},
}


class Backend:
    """The transformers tokenizer, with the `tokenizers`-style calls make_golden.py uses."""

    def __init__(self, auto):
        self.auto = auto
        self.backend = auto.backend_tokenizer

    def get_vocab_size(self, with_added_tokens=True):
        return self.backend.get_vocab_size(with_added_tokens=with_added_tokens)

    def token_to_id(self, token):
        return self.backend.token_to_id(token)

    def decode(self, ids, skip_special_tokens=False):
        return self.auto.decode(ids, skip_special_tokens=skip_special_tokens)


def make_case(name, spec):
    path = ROOT / spec["gguf"] if "gguf" in spec else DATA / "gguf" / spec["gguf_fetched"]
    auto = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    tok = Backend(auto)
    doc = json.loads(auto.backend_tokenizer.to_str())
    rng = random.Random(spec["seed"])
    specials = make_golden.special_strings(doc, rng)
    entries = corpus.generate(specials, spec["count"], spec["seed"])
    probe = auto.encode("Hello world", add_special_tokens=False)
    probe_special = auto.encode("Hello world", add_special_tokens=True)
    start = next(i for i in range(len(probe_special) + 1) if probe_special[i:i + len(probe)] == probe)
    prefix, suffix = probe_special[:start], probe_special[start + len(probe):]
    cases = []
    for entry in entries:
        case = {}
        if isinstance(entry, bytes):
            case["bytes"] = entry.hex()
            text = entry.decode("utf-8", errors="replace")
        else:
            case["text"] = text = entry
        ids = auto.encode(text, add_special_tokens=False)
        ids_special = auto.encode(text, add_special_tokens=True)
        case["ids"] = ids
        if ids_special != prefix + ids + suffix:
            case["ids_special"] = ids_special
        decoded = auto.decode(ids, skip_special_tokens=False)
        if decoded != text:
            case["decoded"] = decoded
        case["roundtrip"] = decoded == text
        decoded_skip = auto.decode(ids, skip_special_tokens=True)
        if decoded_skip != decoded:
            case["decoded_skip"] = decoded_skip
        cases.append(case)
    result = {
        "name": name,
        "gguf": spec.get("gguf"),
        "gguf_fetched": spec.get("gguf_fetched"),
        "generator": f"tools/tokenizer/make_gguf_golden.py with transformers {transformers.__version__}",
        "special_prefix": prefix,
        "special_suffix": suffix,
        "vocab_size": tok.get_vocab_size(),
        "bos_id": auto.bos_token_id,
        "eos_id": auto.eos_token_id,
        "cases": cases,
        "decode_cases": make_golden.random_decode_cases(tok, doc, rng, 100),
    }
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "tokenizer")
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    for name, spec in CASES.items():
        if only and name not in only:
            continue
        result = make_case(name, spec)
        path = args.out / f"{name}.json"
        text = json.dumps(result, ensure_ascii=False, separators=(",", ":"))
        text = text.replace('{"text"', '\n{"text"').replace('{"bytes"', '\n{"bytes"').replace('{"ids":[', '\n{"ids":[')
        path.write_text(text + "\n", encoding="utf-8")
        round_trips = sum(c["roundtrip"] for c in result["cases"])
        print(f"{name}: {len(result['cases'])} strings ({round_trips} round-trip), "
              f"{len(result['decode_cases'])} decode cases, {path.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
