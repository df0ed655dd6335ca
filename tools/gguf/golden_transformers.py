#!/usr/bin/env python3
"""Golden greedy generations and logits of a GGUF model computed by Hugging Face transformers
(which dequantises the GGUF to float32), for specd's real-model tests.

    python tools/gguf/golden_transformers.py MODEL.gguf OUT_DIR [--prompts 20] [--tokens 64]
        [--bos] [--long-prompt TOKENS] [--logit-sample]

Writes OUT_DIR/golden.json: for each prompt its text, the token ids of transformers' own GGUF
tokenizer conversion, the 64 greedy tokens (no stop at end-of-sequence) and the top-1 minus
top-2 logit margin at each step; and OUT_DIR/logits_<i>.npy, the float32 logits of the last
prompt position of the first prompts.

--bos prepends the tokenizer's BOS id to every prompt (Gemma needs it).
--long-prompt N adds one more record whose prompt is the first N ids of all prompts' ids
concatenated (for sliding-window models: a prompt longer than the window).
--logit-sample stores, instead of whole rows (1 MB each for a 262144 vocabulary), a [2, n]
float32 array: row 0 the vocabulary ids (every 64th id and the 64 largest logits, sorted),
row 1 their logits.
"""
import argparse
import json
import os
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village,",
    "The three primary colors are",
    "import numpy as np\n\nx = np.",
    "Water boils at a temperature of",
    "The quick brown fox",
    "In mathematics, a prime number is",
    "My favourite recipe for pancakes:",
    "Q: What is 12 times 12?\nA:",
    "The largest planet in our solar system",
    "class Stack:\n    def __init__(self):",
    "Photosynthesis is the process by which",
    "Dear Sir or Madam,\n\nI am writing to",
    "The history of the Roman Empire",
    "for (int i = 0; i < n; ++i) {",
    "A haiku about autumn:\n",
    "The difference between a list and a tuple in Python is",
    "Shakespeare wrote",
    "<|im_start|>user\nWhat is the capital of Japan?<|im_end|>\n<|im_start|>assistant\n",
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("out")
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--logit-prompts", type=int, default=3)
    parser.add_argument("--long-prompt", type=int, default=0)
    parser.add_argument("--logit-sample", action="store_true")
    parser.add_argument("--bos", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    path = Path(args.model)
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                 torch_dtype=torch.float32)
    model.eval()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    bos = [tok.bos_token_id] if args.bos else []
    prompts = [(text, bos + tok(text, add_special_tokens=False)["input_ids"])
               for text in PROMPTS[:args.prompts]]
    if args.long_prompt:
        joined = [i for _, ids in prompts for i in ids[len(bos):]]
        while len(joined) < args.long_prompt:
            joined = joined + joined
        prompts.append((None, (bos + joined)[:args.long_prompt]))
    for i, (text, ids) in enumerate(prompts):
        with torch.no_grad():
            result = model(torch.tensor([ids]), use_cache=True)
            logits = result.logits[0, -1].float()
            if i < args.logit_prompts:
                row = logits.numpy().astype(np.float32)
                if args.logit_sample:
                    top = np.argsort(-row)[:64]
                    keep = np.unique(np.concatenate([np.arange(0, len(row), 64), top]))
                    row = np.stack([keep.astype(np.float32), row[keep]])
                np.save(out / f"logits_{i}.npy", row)
            past = result.past_key_values
            generated, margins = [], []
            for _ in range(args.tokens):
                top2 = torch.topk(logits, 2).values
                margins.append(float(top2[0] - top2[1]))
                nxt = int(torch.argmax(logits))
                generated.append(nxt)
                result = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
                past = result.past_key_values
                logits = result.logits[0, -1].float()
        records.append({"prompt": text, "prompt_ids": ids, "tokens": generated,
                        "margins": margins})
        print(i, len(ids), repr(tok.decode(generated)[:60]), flush=True)
    meta = {"model": path.name, "transformers": __import__("transformers").__version__,
            "torch": torch.__version__, "records": records}
    (out / "golden.json").write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main()
