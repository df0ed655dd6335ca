# One-call training pipeline on a CUDA machine: corpus -> tokenizer -> target -> draft -> export -> evaluation,
# within a wall-clock budget; writes only the files to ship (plus metrics, provenance, log) into --out.
"""Usage: python3 tools/train/pipeline.py --out DIR [--config pycoder.json] [--work DIR] [--resume]"""
import argparse
import json
import math
import os
import shutil
import sys
import tarfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

import numpy as np  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402

import corpus  # noqa: E402
import evaluate  # noqa: E402
import export  # noqa: E402
import tokenizer_train  # noqa: E402
import train  # noqa: E402
from common import Log, load_config, log, seed_everything, write_json  # noqa: E402
from model import Qwen3LM  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def prepare(cfg: dict, work: Path, resume: bool) -> dict:
    """Corpus, tokenizer and token streams; cached in work/ so that --resume skips them."""
    done = work / "prep.json"
    if resume and done.exists():
        log("prep: reusing", done)
        return json.loads(done.read_text())
    train_docs, val_docs, prov = corpus.collect(cfg["corpus"], cfg["seed"])
    tok = tokenizer_train.train(train_docs, cfg["tokenizer"], cfg["seed"])
    tokenizer_train.save(tok, cfg["tokenizer"], work / "tokenizer")
    eos = tok.token_to_id(cfg["tokenizer"]["eos_token"])
    t = time.time()
    train_stream, train_lens = tokenizer_train.encode_docs(tok, train_docs, eos, cfg["tokenizer"]["encode_chunk"])
    val_stream, val_lens = tokenizer_train.encode_docs(tok, val_docs, eos, cfg["tokenizer"]["encode_chunk"])
    log(f"prep: encoded {train_stream.size / 1e6:.1f}M train + {val_stream.size / 1e6:.1f}M val tokens "
        f"in {time.time() - t:.0f}s")
    per_dist = {}
    for (name, _), n in zip(train_docs + val_docs, train_lens + val_lens):
        per_dist[name] = per_dist.get(name, 0) + n
    for d in prov["distributions"]:
        d["counts"]["tokens"] = per_dist.get(d["name"], 0)
    train_bytes = sum(len(text.encode("utf-8")) for _, text in train_docs)
    val_bytes = sum(len(text.encode("utf-8")) for _, text in val_docs)
    prov["totals"] = {"train_files": len(train_docs), "val_files": len(val_docs), "train_bytes": train_bytes,
                      "val_bytes": val_bytes, "train_tokens": int(train_stream.size),
                      "val_tokens": int(val_stream.size),
                      "token_count_rule": "tokens of each file plus one <|endoftext|> after it"}
    prov["python"] = sys.version.split()[0]
    np.save(work / "train.npy", train_stream)
    np.save(work / "val.npy", val_stream)
    info = {"eos_id": eos, "pad_id": tok.token_to_id(cfg["tokenizer"]["pad_token"]),
            "mask_id": tok.token_to_id(cfg["tokenizer"]["mask_token"]),
            "val_bytes_per_token": val_bytes / max(1, val_stream.size)}
    write_json(work / "provenance.json", prov)
    write_json(done, info)
    return info


def load_eval_prompts(path: Path, tok, limit: int) -> list:
    """Token ids of the evaluation prompts (the 'prompt' text of each JSON line), cut to the last `limit` ids."""
    prompts = []
    for line in path.read_text().splitlines():
        if line.strip():
            ids = tok.encode(json.loads(line)["prompt"], add_special_tokens=False).ids
            prompts.append(ids[-limit:])
    return prompts


def val_prompts(stream, n: int, length: int) -> list:
    """n prompts of `length` tokens taken at evenly spaced offsets of the validation stream."""
    step = (stream.numel() - length) // n
    return [stream[i * step:i * step + length].tolist() for i in range(n)]


def main():
    ap = argparse.ArgumentParser(description="specd pycoder training pipeline")
    ap.add_argument("--out", type=Path, required=True, help="receives only the files to ship")
    ap.add_argument("--config", default="pycoder.json")
    ap.add_argument("--work", type=Path, default=Path("/tmp/specd-train"), help="checkpoints and caches")
    ap.add_argument("--resume", action="store_true", help="reuse prep and continue from checkpoints in --work")
    args = ap.parse_args()
    cfg = load_config(args.config)
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    Log.open(args.out / "train.log")
    budget = cfg["budget"]
    start = Log.start
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    log(f"config {args.config}; torch {torch.__version__}, "
        f"{torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}")
    seed_everything(cfg["seed"])
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    info = prepare(cfg, args.work, args.resume)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(args.work / "tokenizer" / "tokenizer.json"))
    train_stream = torch.from_numpy(np.load(args.work / "train.npy").astype(np.int32)).to(device)
    val_stream = torch.from_numpy(np.load(args.work / "val.npy").astype(np.int32)).to(device)
    log(f"prep done at {Log.elapsed():.0f}s")

    # ---- target
    tcfg = cfg["target"]
    target = Qwen3LM(tcfg["model"]).to(device)
    log(f"target: {target.num_params() / 1e6:.2f}M parameters")
    target_deadline = start + budget["total_s"] - budget["draft_s"] - budget["final_s"]
    target_state = train.train_phase("target", target, lambda x, y: train.ce_loss(target, x, y), train_stream,
                                     tcfg["train"], target_deadline, args.work / "target.pt", args.resume, cfg["seed"])

    # ---- draft, distilled from the target
    dcfg = cfg["draft"]
    seed_everything(cfg["seed"] + 1)
    draft = Qwen3LM(dcfg["model"]).to(device)
    log(f"draft: {draft.num_params() / 1e6:.2f}M parameters")
    target.eval().requires_grad_(False)
    draft_deadline = start + budget["total_s"] - budget["final_s"]
    draft_state = train.train_phase(
        "draft", draft, lambda x, y: train.distill_loss(draft, target, x, y, dcfg["distill"]), train_stream,
        dcfg["train"], draft_deadline, args.work / "draft.pt", args.resume, cfg["seed"] + 1)

    # ---- export (bf16) and check against transformers; float32 math from here on (no TF32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    export_dir = args.work / "export"
    check_ids = val_stream[:2 * 256].long().view(2, 256)
    exports = {}
    for name, model in (("pycoder-target", target), ("pycoder-draft", draft)):
        exports[name] = export.export(model, export_dir / name, args.work / "tokenizer", info["eos_id"], info["pad_id"],
                                      cfg["export"]["max_shard_bytes"], check_ids)
    for path in sorted(export_dir.rglob("*.safetensors")):  # ship the weights before anything else can fail
        shutil.copy(path, args.out / f"{path.parent.name}__{path.name}")
    log(f"export done at {Log.elapsed():.0f}s")

    # ---- evaluation on the shipped (bf16-rounded) weights
    t_eval, d_eval = export.bf16_copy(target), export.bf16_copy(draft)
    import transformers
    metrics = {"seed": cfg["seed"], "config": cfg, "prep": info, "eval_compute": "bf16 autocast on bf16 weights",
               "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
               "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                            "tokenizers": tokenizers.__version__, "python": sys.version.split()[0]},
               "target": {"params": target.num_params(), "train": target_state},
               "draft": {"params": draft.num_params(), "train": draft_state}, "export": exports}
    try:
        evaluate_all(metrics, t_eval, d_eval, tok, val_stream, info, cfg, device)
    except Exception:  # keep the exported models and the log even if an evaluation step breaks
        metrics["eval_error"] = traceback.format_exc()
        log("ERROR in evaluation:", metrics["eval_error"])
    metrics["elapsed_s"] = Log.elapsed()
    write_json(args.work / "metrics.json", metrics)
    package(args, export_dir)


def evaluate_all(metrics, t_eval, d_eval, tok, val_stream, info, cfg, device):
    """Validation loss/perplexity, teacher-forced greedy agreement, speculative-decoding acceptance."""
    ecfg = cfg["eval"]
    for key, model in (("target", t_eval), ("draft", d_eval)):
        metrics[key]["val"] = train.eval_loss(model, val_stream, ecfg["val_seq_len"], ecfg["val_windows"],
                                              ecfg["batch"])
        metrics[key]["val"]["bits_per_byte"] = metrics[key]["val"]["loss"] / math.log(2) / info["val_bytes_per_token"]
        log(f"{key}: val loss {metrics[key]['val']['loss']:.4f} ppl {metrics[key]['val']['perplexity']:.3f}")
    # Agreement and speculative-decoding simulation under bf16 autocast (flash attention), like training.
    with torch.autocast(device.type, dtype=torch.bfloat16):
        alpha = evaluate.greedy_agreement(t_eval, d_eval, val_stream, ecfg["val_seq_len"], ecfg["agreement_windows"])
        metrics["greedy_agreement_val"] = {"alpha": alpha, "iid_expected_length_k4": evaluate.expected_length(alpha, 4)}
        log(f"greedy agreement (teacher-forced, val) {alpha:.4f}")
        suppress = [info["eos_id"], info["pad_id"], info["mask_id"]]
        spec = ecfg["speculative"]
        limit = cfg["target"]["train"]["seq_len"] - spec["new_tokens"] - 2 * spec["k"] - 2
        prompt_file = REPO / ecfg["prompts"]
        if prompt_file.exists():
            prompts = load_eval_prompts(prompt_file, tok, limit)[:ecfg.get("max_prompts")]
            metrics["acceptance_eval_prompts"] = evaluate.run_acceptance(t_eval, d_eval, prompts, spec, suppress,
                                                                         ecfg["batch"])
            log("acceptance (eval prompts):", json.dumps(metrics["acceptance_eval_prompts"]))
        prompts = val_prompts(val_stream, spec["val_prompts"], spec["val_prompt_len"])
        metrics["acceptance_val_text"] = evaluate.run_acceptance(t_eval, d_eval, prompts, spec, suppress, ecfg["batch"])
        log("acceptance (val text):", json.dumps(metrics["acceptance_val_text"]))


def package(args, export_dir: Path):
    """Weights were copied already; everything else (configs, tokenizers, metrics, provenance) goes in one tar."""
    shutil.copy(args.work / "provenance.json", export_dir / "provenance.json")
    shutil.copy(args.work / "metrics.json", export_dir / "metrics.json")
    with tarfile.open(args.out / "small_files.tar", "w") as tar:
        for path in sorted(export_dir.rglob("*")):
            if path.is_file() and not path.name.endswith(".safetensors"):
                tar.add(path, arcname=str(path.relative_to(export_dir)))
    log(f"all done in {Log.elapsed():.0f}s; out: {sorted(p.name for p in args.out.iterdir())}")


if __name__ == "__main__":
    main()
