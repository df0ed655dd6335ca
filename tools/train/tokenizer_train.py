# Trains the byte-level BPE tokenizer (HF tokenizers) and encodes documents into one token stream.
import json
import random
from pathlib import Path

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from common import log

# Qwen2/Qwen3 pre-tokenizer pattern: contractions, letter runs with one leading non-letter, single digits,
# punctuation runs, newline runs, and whitespace runs (a run before a word leaves its last space to the word).
SPLIT_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def build_empty() -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    return tok


def sample_texts(docs: list, max_bytes: int, seed: int) -> list:
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    out, total = [], 0
    for i in order:
        if total >= max_bytes:
            break
        out.append(docs[i][1])
        total += len(docs[i][1])
    return out


def train(docs: list, cfg: dict, seed: int) -> Tokenizer:
    tok = build_empty()
    texts = sample_texts(docs, cfg["train_sample_bytes"], seed)
    trainer = trainers.BpeTrainer(vocab_size=cfg["vocab_size"], min_frequency=cfg["min_frequency"],
                                  special_tokens=cfg["special_tokens"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    log(f"tokenizer: training BPE vocab {cfg['vocab_size']} on {len(texts)} files "
        f"({sum(map(len, texts)) / 1e6:.1f} MB)")
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    assert tok.get_vocab_size() == cfg["vocab_size"], tok.get_vocab_size()
    return tok


def tokenizer_config(cfg: dict, tok: Tokenizer) -> dict:
    decoder = {str(tok.token_to_id(t)): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                         "single_word": False, "special": True} for t in cfg["special_tokens"]}
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": decoder,
        "bos_token": None,
        "eos_token": cfg["eos_token"],
        "pad_token": cfg["pad_token"],
        "mask_token": cfg["mask_token"],
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": cfg["model_max_length"],
    }


def save(tok: Tokenizer, cfg: dict, out: Path):
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(cfg, tok), indent=2) + "\n")


def encode_docs(tok: Tokenizer, docs: list, eos_id: int, chunk: int) -> tuple:
    """Encodes docs (in parallel inside tokenizers) into one uint16 stream, eos after each doc.
    Returns (stream, tokens per doc)."""
    parts, lengths = [], []
    for start in range(0, len(docs), chunk):
        batch = [text for _, text in docs[start:start + chunk]]
        for enc in tok.encode_batch_fast(batch, add_special_tokens=False):
            ids = np.asarray(enc.ids + [eos_id], dtype=np.uint16)
            parts.append(ids)
            lengths.append(len(ids))
    return (np.concatenate(parts) if parts else np.zeros(0, np.uint16)), lengths
