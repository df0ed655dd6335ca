#!/usr/bin/env python3
"""Golden data for specd's load-time quantisers (--quantize int8|int4), computed with numpy.

Writes tests/data/quant/*.npy (float32): a fixed bf16-valued weight [rows, 384] and, for each
format, the codes, the per-block scale (and min) and the dequantised values. The formulas are
the specification in src/backend/quantize.h, evaluated in float32 as numpy does:

  int8 (per output channel): d = max|w| / 127, q = clip(rint(w / d), -127, 127), y = d * q
  int4 (group 128, asymmetric): d = f16((max - min) / 15), m = f16(min),
        q = clip(rint((w - m) / d), 0, 15), y = (d * q) + m   (two float32 roundings)

Usage: python3 tools/quant/make_quant_fixtures.py [OUT_DIR]
"""
import os
import sys

import numpy as np

GROUP = 128


def to_bf16(x):
    """Rounds float32 values to bfloat16 (nearest even) and returns them as float32."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


def int8_ties(cols):
    """max|w| = 127/128, so d = 2^-7 exactly and w = (i + 0.5) / 128 rounds half to even."""
    j = np.arange(cols)
    row = ((j % 21) - 10 + 0.5) / 128.0
    row[0] = 127.0 / 128.0
    return row


def int4_ties(cols):
    """Each group spans [0, 15/64], so d = 2^-6 and m = 0 exactly; (i + 0.5) / 64 is a tie."""
    j = np.arange(cols) % GROUP
    row = ((j % 15) + 0.5) / 64.0
    row[j == 0] = 0.0
    row[j == 1] = 15.0 / 64.0
    return row


def weights():
    rng = np.random.default_rng(20261122)
    cols = 3 * GROUP
    rows = [
        rng.normal(0, 0.05, cols),                      # typical
        np.concatenate([rng.normal(0, 0.02, cols - 1), [0.9]]),  # one outlier
        np.zeros(cols),                                 # an all-zero row
        np.concatenate([np.full(GROUP, 0.25), rng.normal(0, 0.05, cols - GROUP)]),  # flat group
        rng.uniform(-1.0, 1.0, cols),                   # uniform, wide
        rng.normal(0, 1e-3, cols),                      # small
        rng.normal(0, 3e-6, cols),                      # tiny: f16 scale is subnormal
        np.abs(rng.normal(0.1, 0.05, cols)),            # all positive (min > 0)
        int8_ties(cols),                                # w / d exactly halfway for int8
        int4_ties(cols),                                # (w - m) / d exactly halfway for int4
    ]
    return to_bf16(np.stack(rows).astype(np.float32))


def int8(w):
    amax = np.max(np.abs(w), axis=1, keepdims=True)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(d > 0, np.clip(np.rint(w / d), -127, 127), 0).astype(np.float32)
    return q, d, (d * q).astype(np.float32)


def int4(w):
    g = w.reshape(w.shape[0], -1, GROUP)
    lo, hi = g.min(axis=2), g.max(axis=2)
    d = ((hi - lo) / np.float32(15)).astype(np.float16).astype(np.float32)
    m = lo.astype(np.float16).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(d[..., None] > 0, np.clip(np.rint((g - m[..., None]) / d[..., None]), 0, 15), 0)
    q = q.astype(np.float32)
    y = ((d[..., None] * q).astype(np.float32) + m[..., None]).astype(np.float32)
    return q.reshape(w.shape), d, m, y.reshape(w.shape)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "..", "tests", "data", "quant")
    os.makedirs(out, exist_ok=True)
    w = weights()
    q8, d8, y8 = int8(w)
    q4, d4, m4, y4 = int4(w)
    arrays = {"weights": w, "int8_codes": q8, "int8_scales": d8, "int8_dequant": y8,
              "int4_codes": q4, "int4_scales": d4, "int4_mins": m4, "int4_dequant": y4}
    for name, a in arrays.items():
        np.save(os.path.join(out, name + ".npy"), np.ascontiguousarray(a, dtype=np.float32))
    print(f"wrote {len(arrays)} arrays for a {w.shape[0]} x {w.shape[1]} weight to {out}")


if __name__ == "__main__":
    main()
