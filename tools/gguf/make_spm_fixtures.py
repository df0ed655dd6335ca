#!/usr/bin/env python3
"""Writes tiny tokenizer-only GGUF files with SentencePiece-style `llama` tokenizers (tokens,
scores, token types, no merges) for specd's GGUF tokenizer tests. The expected ids come from
transformers' own GGUF conversion of the same files (tools/tokenizer/make_gguf_golden.py).

    python tools/gguf/make_spm_fixtures.py [--data DIR] [--out tests/data/gguf]

- spm_llama.gguf: architecture `llama`, a cut of the Llama-2 vocabulary (the three specials, the
  256 byte tokens, the first 1000 pieces in rank order and the single characters they use),
  scores as Llama-2's converter writes them (0 for specials and bytes, then descending).
- spm_llama_edge.gguf: architecture `llama`, hand-made: only ASCII byte tokens (so other
  characters fall back to the unknown token), CONTROL, USER_DEFINED, UNUSED and UNKNOWN token
  types, a duplicated token string, a token with a space, whitespace-only tokens, tied scores,
  add_space_prefix false, no BOS, EOS added.
- spm_phi3.gguf: the same vocabulary with architecture `phi3` (transformers' Phi-3 flavour), BOS
  added by default.
- spm_gemma.gguf: architecture `gemma3`, hand-made in Gemma's layout: control tokens first,
  space-only tokens spelled with real spaces, newline runs as USER_DEFINED, scores that do not
  follow the merge order (transformers orders Gemma's merges by position instead).
"""
import argparse
import json
import os
from pathlib import Path

import gguf

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def write(path, arch, tokens, scores, types, meta):
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    for key, value in meta.items():
        if isinstance(value, bool):
            writer.add_bool(key, value)
        else:
            writer.add_uint32(key, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"{path}: {len(tokens)} tokens, {path.stat().st_size} bytes")


def llama(data_dir, out):
    vocab = json.loads((data_dir / "llama2" / "tokenizer.json").read_text(encoding="utf-8"))
    by_id = sorted(vocab["model"]["vocab"].items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in by_id[:1259]]
    chars = sorted({c for t in tokens[259:] for c in t} | set("abcdefghijklmnopqrstuvwxyz"
                                                              "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"))
    tokens += [c for c in chars if c not in tokens]
    types = [UNKNOWN, CONTROL, CONTROL] + [BYTE] * 256 + [NORMAL] * (len(tokens) - 259)
    scores = [0.0] * 259 + [-float(i) for i in range(len(tokens) - 259)]
    write(out / "spm_llama.gguf", "llama", tokens, scores, types, {
        "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.unknown_token_id": 0, "tokenizer.ggml.add_bos_token": True,
        "tokenizer.ggml.add_eos_token": False})


def llama_edge(out, arch="llama", name="spm_llama_edge.gguf", meta=None):
    entries = [("<unk>", 0.0, UNKNOWN), ("<s>", 0.0, CONTROL), ("</s>", 0.0, CONTROL)]
    entries += [(f"<0x{b:02X}>", 0.0, BYTE) for b in range(128)]
    entries += [("<|im_start|>", 0.0, CONTROL), ("<|im_end|>", 0.0, CONTROL),
                ("<think>", 0.0, USER_DEFINED), ("</think>", 0.0, USER_DEFINED),
                ("<unused0>", 0.0, UNUSED), ("<pad>", 0.0, CONTROL)]
    pieces = ["▁t", "he", "▁the", "in", "er", "▁a", "on", "re", "at", "▁s", "en", "or", "▁w",
              "an", "▁o", "▁th", "is", "▁c", "▁b", "es", "ll", "▁in", "▁f", "it", "ar", "▁p",
              "ing", "▁m", "ou", "le", "▁to", "▁and", "▁of", "ed", "al", "▁d", "ion", "▁h",
              "▁is", "▁l", "▁T", "▁I", "▁H", "ello", "▁Hello", "▁wor", "ld", "▁world", "▁▁",
              "▁▁▁▁", "\n\n", "a b", "12", "123", "▁1", "()", "{}", "==", "::"]
    score = -1.0
    for i, piece in enumerate(pieces):
        # Runs of equal scores: transformers breaks the tie by the lengths of the two halves.
        entries.append((piece, score, NORMAL))
        if i % 3 == 2:
            score -= 1.0
    entries += [("  ", -50.0, USER_DEFINED), ("\t", -50.0, NORMAL), ("▁the", -60.0, NORMAL)]
    chars = sorted(set("".join(pieces)) | set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW"
                                               "XYZ0123456789.,;:!?'\"-_()[]{}<>/\\|=+*&^%$#@~`é中"))
    entries += [(c, -100.0 - i, NORMAL) for i, c in enumerate(chars) if c not in pieces]
    tokens, scores, types = (list(x) for x in zip(*entries))
    write(out / name, arch, tokens, scores, types, meta or {
        "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.unknown_token_id": 0, "tokenizer.ggml.padding_token_id": 136,
        "tokenizer.ggml.add_bos_token": False,
        "tokenizer.ggml.add_eos_token": True, "tokenizer.ggml.add_space_prefix": False})


def gemma(out):
    entries = [("<pad>", -1000.0, CONTROL), ("<eos>", -1000.0, CONTROL),
               ("<bos>", -1000.0, CONTROL), ("<unk>", -1000.0, UNKNOWN),
               ("<mask>", -1000.0, CONTROL), ("[multimodal]", -1000.0, USER_DEFINED),
               ("<start_of_turn>", -1000.0, CONTROL), ("<end_of_turn>", -1000.0, CONTROL)]
    entries += [("\n" * n, -1000.0, USER_DEFINED) for n in range(1, 5)]
    entries += [(" " * n, -1000.0, USER_DEFINED) for n in range(2, 6)]
    entries += [("\t", -1000.0, USER_DEFINED), ("<start_of_image>", -1000.0, CONTROL)]
    entries += [(f"<0x{b:02X}>", 0.0, BYTE) for b in range(256)]
    pieces = ["▁▁", "in", "▁t", "er", "▁a", "he", "on", "re", "▁s", "en", "at", "or", "▁the",
              "es", "▁w", "an", "▁c", "is", "it", "▁o", "▁p", "▁b", "ed", "ar", "ing", "▁f",
              "▁m", "ou", "▁in", "▁to", "al", "le", "▁d", "▁of", "ion", "▁and", "ic", "▁h",
              "ro", "▁l", "▁th", "▁H", "ello", "▁Hello", "▁world", "ld", "▁wor", "▁▁▁▁", "de",
              "▁de", "▁(", "()", "):", "▁=", "▁==", "ll", "ell", "ent", "▁re", "▁co", "▁con"]
    # Gemma's scores are not the merge order: give them a scrambled order on purpose.
    entries += [(p, -float((i * 37) % len(pieces)), NORMAL) for i, p in enumerate(pieces)]
    chars = sorted(set("".join(pieces)) | set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"
                                               "WXYZ0123456789.,;:!?'\"-_()[]{}<>/\\|=+*&^%$#@~`é中日本"))
    entries += [(c, -1000.0 - i, NORMAL) for i, c in enumerate(chars) if c not in pieces]
    tokens, scores, types = (list(x) for x in zip(*entries))
    write(out / "spm_gemma.gguf", "gemma3", tokens, scores, types, {
        "tokenizer.ggml.bos_token_id": 2, "tokenizer.ggml.eos_token_id": 1,
        "tokenizer.ggml.unknown_token_id": 3, "tokenizer.ggml.padding_token_id": 0,
        "tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.add_eos_token": False,
        "tokenizer.ggml.add_space_prefix": False})


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    default_data = Path(os.environ.get("SPECD_DATA_DIR", Path.home() / ".cache" / "specd"))
    root = Path(__file__).resolve().parents[2]
    parser.add_argument("--data", type=Path, default=default_data / "tokenizers",
                        help="fetched tokenizers (tools/tokenizer/fetch_tokenizers.sh)")
    parser.add_argument("--out", type=Path, default=root / "tests" / "data" / "gguf")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    llama(args.data, args.out)
    llama_edge(args.out)
    # Phi-3 flavour (normalizer Prepend + Replace, no pre-tokenizer) on the same vocabulary.
    llama_edge(args.out, "phi3", "spm_phi3.gguf", {
        "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 132,
        "tokenizer.ggml.unknown_token_id": 0, "tokenizer.ggml.add_space_prefix": True})
    gemma(args.out)


if __name__ == "__main__":
    main()
