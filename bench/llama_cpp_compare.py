#!/usr/bin/env python3
"""specd and llama.cpp side by side on one GGUF file: prefill and decode tokens/s on the CPU.

llama.cpp is not part of specd: this script needs the `llama_cpp` Python module (llama-cpp-python)
already installed in the Python that runs it. Both engines get the same random prompt of
--prompt-len token ids and generate --gen-len tokens greedily, with the same thread count; each
runs --repeats times, taking turns with the other, and the best run counts. llama.cpp's times
come from its own counters (llama_perf_context), specd's from `specd bench --json`. Prints one
JSON object.

    python bench/llama_cpp_compare.py --specd build/src/cli/specd --model FILE.gguf --threads 2
"""
import argparse
import datetime
import json
import platform
import random
import subprocess
import sys
import tempfile


def load_llama_cpp(args):
    import llama_cpp

    return llama_cpp.Llama(model_path=args.model, n_threads=args.threads,
                           n_threads_batch=args.threads,
                           n_ctx=args.prompt_len + args.gen_len + 8, n_batch=args.prompt_len,
                           verbose=False)


def run_llama_cpp(llm, args, prompt, best):
    import llama_cpp

    llm.reset()
    llama_cpp.llama_perf_context_reset(llm.ctx)
    out = llm.generate(prompt, temp=0.0, top_k=1, reset=True)
    for _ in range(args.gen_len):
        next(out)
    perf = llama_cpp.llama_perf_context(llm.ctx)
    prefill = perf.n_p_eval / (perf.t_p_eval_ms / 1000.0)
    decode = perf.n_eval / (perf.t_eval_ms / 1000.0)
    best["prefill_tok_s"] = max(best.get("prefill_tok_s", 0.0), prefill)
    best["decode_tok_s"] = max(best.get("decode_tok_s", 0.0), decode)
    best["version"] = llama_cpp.__version__


def run_specd(args, prompt, best):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as prompts:
        prompts.write(json.dumps({"prompt_ids": prompt}) + "\n")
        prompts.flush()
        out = subprocess.run(
            [args.specd, "bench", "-m", args.model, "--threads", str(args.threads),
             "--prompts", prompts.name, "--gen-len", str(args.gen_len), "--modes", "none",
             "--json"], check=True, capture_output=True, text=True).stdout
    report = json.loads(out)
    best["commit"] = report.get("commit", "unknown")  # the commit the binary was built from
    plain = report["modes"][0]
    best["prefill_tok_s"] = max(best.get("prefill_tok_s", 0.0), report["prefill_tok_s"])
    best["decode_tok_s"] = max(best.get("decode_tok_s", 0.0), plain["decode_tok_s"])


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--specd", required=True, help="the specd executable")
    parser.add_argument("--model", required=True, help="GGUF file")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt-len", type=int, default=512)
    parser.add_argument("--gen-len", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--vocab", type=int, default=32000,
                        help="prompt ids are drawn from [100, vocab)")
    args = parser.parse_args()
    rng = random.Random(1)
    prompt = [rng.randrange(100, args.vocab) for _ in range(args.prompt_len)]
    # The engines take turns, so both see the same minutes of a machine that may be shared.
    llm = load_llama_cpp(args)
    specd, llama = {}, {}
    for _ in range(args.repeats):
        run_specd(args, prompt, specd)
        run_llama_cpp(llm, args, prompt, llama)
    result = {
        "model": args.model.rsplit("/", 1)[-1], "threads": args.threads, "cpu": cpu_name(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": specd.pop("commit"), "prompt_len": args.prompt_len, "gen_len": args.gen_len,
        "repeats": args.repeats, "specd": specd, "llama_cpp": llama,
        "decode_ratio": specd["decode_tok_s"] / llama["decode_tok_s"],
        "prefill_ratio": specd["prefill_tok_s"] / llama["prefill_tok_s"],
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    sys.exit(main())
