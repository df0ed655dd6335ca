# Cuts evaluation prompts (context + a def/class header + the start of its docstring) from the Python
# standard library sources of a Debian python3.11 install; deterministic; optional prompt_ids from tokenizer.json.
"""Usage: python3 tools/train/make_eval_prompts.py [--src /usr/lib/python3.11]
       [--tokenizer models/pycoder-target/tokenizer.json] [--out bench/prompts/pycoder_eval.jsonl]"""
import argparse
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONTEXT_LINES = 30  # lines of source before the header
PICKS_PER_FILE = 2  # candidates taken at 1/3 and 2/3 of each file's candidate list
HEADER = re.compile(r"^\s*(async\s+def|def|class)\s+\w+.*:\s*(#.*)?$")
DOCSTRING = re.compile(r'^\s*[rRuU]?("""|\'\'\')')


def candidates(lines: list) -> list:
    """Header line indices that have CONTEXT_LINES lines before them and a docstring right after."""
    return [i for i in range(CONTEXT_LINES, len(lines) - 2)
            if HEADER.match(lines[i]) and DOCSTRING.match(lines[i + 1])]


def prompt_at(lines: list, i: int) -> str:
    body = lines[i - CONTEXT_LINES:i + 2]
    if lines[i + 1].strip() in ('"""', "'''", 'r"""', "r'''"):  # docstring text starts on the next line
        body.append(lines[i + 2])
    return "\n".join(body) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=Path("/usr/lib/python3.11"))
    ap.add_argument("--tokenizer", type=Path, help="tokenizer.json; adds prompt_ids")
    ap.add_argument("--out", type=Path, default=REPO / "bench/prompts/pycoder_eval.jsonl")
    args = ap.parse_args()
    tok = None
    if args.tokenizer:
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(str(args.tokenizer))
    records = []
    for path in sorted(args.src.glob("*.py")):
        lines = path.read_text(encoding="utf-8").replace("\r\n", "\n").split("\n")
        cands = candidates(lines)
        spread = {len(cands) * (j + 1) // (PICKS_PER_FILE + 1) for j in range(PICKS_PER_FILE)}
        picks = sorted(cands[k] for k in spread) if cands else []
        for i in picks:
            rec = {"id": f"{path.stem}-{i + 1}", "source": f"{path}:{i + 1}", "prompt": prompt_at(lines, i)}
            if tok:
                rec["prompt_ids"] = tok.encode(rec["prompt"], add_special_tokens=False).ids
            records.append(rec)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    print(f"{len(records)} prompts from {args.src} -> {args.out}")


if __name__ == "__main__":
    main()
