# Data preparation: collects the Python sources of the installed distributions (site-packages),
# keeps permissively licensed ones, filters and deduplicates files, and splits by whole package.
import hashlib
import importlib.metadata as md
import random
import re
import site
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import cpu_count, log

COPYLEFT = re.compile(r"AGPL|LGPL|\bGPL|GNU General|GNU Lesser|GNU Library|\bMPL\b|Mozilla|EUPL|\bEPL\b|Eclipse", re.I)
PERMISSIVE = re.compile(r"\bMIT\b|BSD|Apache|\bPSF|Python Software Foundation|\bISC\b|Unlicense|Zlib|HPND|CC0|"
                        r"Public Domain|\bPython-2\.0", re.I)
DEDUP_RULE = ("exact duplicates by SHA-256 of the UTF-8 text after normalising line endings (CRLF and CR to LF) "
              "and removing a leading BOM; held-out (validation) files are kept first, so a training file identical "
              "to a validation file is dropped")


def site_dirs() -> list:
    dirs = list(site.getsitepackages()) + [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    seen, out = set(), []
    for d in dirs:
        p = Path(d).resolve()
        if p.is_dir() and p not in seen:
            seen.add(p)
            out.append(p)
    return out


def normalize_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def licence_of(meta) -> tuple:
    """(summary, category): License-Expression, else License :: classifiers, else the License field."""
    expr = (meta.get("License-Expression") or "").strip()
    classifiers = [c.split("::", 1)[1].strip() for c in (meta.get_all("Classifier") or [])
                   if c.startswith("License ::")]
    field = (meta.get("License") or "").strip()
    first_line = field.splitlines()[0][:120] if field else ""
    summary = expr or "; ".join(classifiers) or first_line
    text = expr or " ".join(classifiers) or field[:300]
    if not text:
        return "UNKNOWN", "unknown"
    if COPYLEFT.search(text):
        return summary, "copyleft"
    return summary, "permissive" if PERMISSIVE.search(text) else "unknown"


def distributions(dirs: list) -> list:
    """One record per installed distribution: name, version, licence, and its .py files (from RECORD)."""
    dists = {}
    for dist in md.distributions(path=[str(d) for d in dirs]):
        name = normalize_name(dist.metadata["Name"] or "")
        if not name or name in dists:
            continue
        base = Path(dist.locate_file("")).resolve()
        files = sorted(str(f) for f in (dist.files or []) if str(f).endswith(".py") and not str(f).startswith(".."))
        summary, category = licence_of(dist.metadata)
        dists[name] = dict(name=name, version=dist.version, licence=summary, licence_category=category,
                           base=base, files=files)
    return [dists[k] for k in sorted(dists)]


def normalize_text(raw: bytes):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def keep_reason(text, cfg) -> str:
    if text is None:
        return "not_utf8"
    n = len(text.encode("utf-8"))
    if n < cfg["min_file_bytes"]:
        return "too_small"
    if n > cfg["max_file_bytes"]:
        return "too_large"
    if max((len(line) for line in text.split("\n")), default=0) > cfg["max_line_chars"]:
        return "long_line"
    return ""


def read_file(path: Path):
    try:
        return path.read_bytes()
    except OSError:
        return None


def cap_train(train: list, dists: list, max_bytes, seed: int) -> list:
    """Shuffles training files (seeded) and, if max_bytes is set, keeps a prefix of at most max_bytes."""
    random.Random(seed).shuffle(train)
    if not max_bytes:
        return train
    by_name, kept, total = {d["name"]: d for d in dists}, [], 0
    for name, text in train:
        size = len(text.encode("utf-8"))
        if total + size > max_bytes:
            by_name[name]["counts"]["over_cap"] += 1
            by_name[name]["counts"]["kept"] -= 1
            by_name[name]["counts"]["bytes_kept"] -= size
            continue
        kept.append((name, text))
        total += size
    return kept


def collect(cfg: dict, seed: int) -> tuple:
    """Returns (train_docs, val_docs, provenance); a doc is (dist_name, text)."""
    dirs = site_dirs()
    dists = distributions(dirs)
    val_names = {normalize_name(n) for n in cfg["val_packages"]}
    excluded_names = {normalize_name(n) for n in cfg.get("exclude_packages", [])}
    only = {normalize_name(n) for n in cfg["include_only"]} if cfg.get("include_only") else None
    log(f"corpus: {len(dists)} distributions under {[str(d) for d in dirs]}")
    jobs = []
    for d in dists:
        d["split"] = "val" if d["name"] in val_names else "train"
        d["included"] = (d["licence_category"] == "permissive" and d["name"] not in excluded_names
                         and (only is None or d["name"] in only))
        d["counts"] = dict(files_listed=len(d["files"]), not_found=0, not_utf8=0, too_small=0, too_large=0,
                           long_line=0, duplicate=0, over_cap=0, kept=0, bytes_kept=0, tokens=0)
        if d["included"]:
            jobs.extend((d, d["base"] / f) for f in d["files"])
    with ThreadPoolExecutor(max_workers=2 * cpu_count()) as pool:
        blobs = list(pool.map(lambda job: read_file(job[1]), jobs))
    seen, train, val = set(), [], []
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i][0]["split"] != "val", jobs[i][0]["name"], str(jobs[i][1])))
    for i in order:
        d, raw = jobs[i][0], blobs[i]
        if raw is None:
            d["counts"]["not_found"] += 1
            continue
        text = normalize_text(raw)
        reason = keep_reason(text, cfg)
        if reason:
            d["counts"][reason] += 1
            continue
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        if digest in seen:
            d["counts"]["duplicate"] += 1
            continue
        seen.add(digest)
        d["counts"]["kept"] += 1
        d["counts"]["bytes_kept"] += len(text.encode("utf-8"))
        (val if d["split"] == "val" else train).append((d["name"], text))
    train = cap_train(train, dists, cfg.get("max_train_bytes"), seed)
    missing = val_names - {d["name"] for d in dists if d["included"]}
    if missing:
        raise SystemExit(f"validation packages not found or not permissive: {sorted(missing)}")
    provenance = dict(
        site_dirs=[str(Path(*d.parts[-3:])) for d in dirs],  # e.g. lib/python3.12/site-packages
        dedup_rule=DEDUP_RULE,
        filters={k: cfg.get(k) for k in ("min_file_bytes", "max_file_bytes", "max_line_chars", "max_train_bytes")},
        licence_rule="a distribution is used only if its License-Expression, else its 'License ::' classifiers, "
                     "else its License field names a permissive licence (MIT, BSD, Apache, PSF, ISC, Zlib, HPND, "
                     "CC0, Unlicense, public domain) and no copyleft one (GPL/LGPL/AGPL/MPL/EPL/EUPL)",
        val_packages=sorted(val_names),
        distributions=[{k: v for k, v in d.items() if k not in ("base", "files")} for d in dists],
    )
    log(f"corpus: kept {len(train)} train files ({sum(len(t) for _, t in train) / 1e6:.1f} MB), "
        f"{len(val)} val files ({sum(len(t) for _, t in val) / 1e6:.1f} MB)")
    return train, val, provenance
