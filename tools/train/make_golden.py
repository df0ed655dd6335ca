# Golden logits / hidden states / greedy tokens for the shipped pycoder target, computed by transformers on CPU
# (float32, eager attention) with the same helpers and schema as tools/golden/make_golden.py.
"""Usage: python3 tools/train/make_golden.py [--model models/pycoder-target] [--out tests/data/golden/pycoder_target]"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
import transformers

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools/golden"))
import make_golden as mg  # noqa: E402

TRAINING_CONFIG = Path(__file__).resolve().parent / "configs/pycoder.json"


def pick_token_ids(model, prompts_file: Path) -> tuple:
    """First eval prompt whose first SEQ_LEN ids give a greedy path with a clear top1-top2 margin."""
    for line in prompts_file.read_text().splitlines():
        ids = json.loads(line)["prompt_ids"][:mg.SEQ_LEN]
        if len(ids) < mg.SEQ_LEN:
            continue
        tokens, margin = mg.greedy_generate(model, ids[:mg.PROMPT_LEN])
        ref_tokens, ref_margin = mg.greedy_reference(model, ids[:mg.PROMPT_LEN])
        assert tokens == ref_tokens, "generate() and the full-forward argmax loop disagree"
        if min(margin, ref_margin) >= mg.MIN_MARGIN and len(set(tokens)) >= mg.MIN_DISTINCT_GREEDY:
            return ids, tokens, min(margin, ref_margin)
    raise RuntimeError("no eval prompt met MIN_MARGIN / MIN_DISTINCT_GREEDY")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=REPO / "models/pycoder-target")
    ap.add_argument("--prompts", type=Path, default=REPO / "bench/prompts/pycoder_eval.jsonl")
    ap.add_argument("--out", type=Path, default=REPO / "tests/data/golden/pycoder_target")
    args = ap.parse_args()
    torch.set_num_threads(1)  # fixed reduction order -> byte-identical output
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    model = mg.load_f32(args.model)
    token_ids, tokens, margin = pick_token_ids(model, args.prompts)
    logits, hidden, prenorm = mg.forward(model, token_ids)
    case = mg.Case("pycoder_target", "qwen3", "bfloat16", json.loads(TRAINING_CONFIG.read_text())["seed"],
                   "trained pycoder target", {})
    golden = mg.golden_json(case, case.seed, model, token_ids, tokens, margin, mg.top2_margin(torch.from_numpy(logits)))
    golden["model_dir"] = str(args.model.resolve().relative_to(REPO))
    args.out.mkdir(parents=True, exist_ok=True)
    for name, array in {"logits.npy": logits, "hidden_states.npy": hidden, "last_layer_prenorm.npy": prenorm}.items():
        np.save(args.out / name, np.ascontiguousarray(array, dtype=np.float32))
    mg.write_json(args.out / "golden.json", golden)
    print(f"pycoder_target: token_ids {token_ids[:8]}..., greedy {tokens}, min_top2_margin {margin:.4f}")


if __name__ == "__main__":
    main()
