#!/usr/bin/env python3
"""Writes the GGUF golden fixtures of tests/data/gguf with the reference GGUF implementation
(the `gguf` PyPI package, llama.cpp's gguf-py): a small GGUF file holding one random tensor per
block format plus metadata of every value type, and the dequantised values of each tensor as
computed by gguf-py (tests/data/gguf/dequant_<type>.npy).

Run with a Python that has gguf and numpy (tools/gguf/setup_models.sh makes one):
    python tools/gguf/make_quant_fixtures.py tests/data/gguf
"""
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

ROWS, COLS = 3, 512
# Byte offsets of each format's f16 scale fields: (d offsets, min offsets).
HALF_FIELDS = {
    T.Q8_0: ([0], []), T.Q4_0: ([0], []), T.Q5_0: ([0], []),
    T.Q4_1: ([0], [2]), T.Q5_1: ([0], [2]),
    T.Q4_K: ([0], [2]), T.Q5_K: ([0], [2]), T.Q6_K: ([208], []),
}


def random_blocks(rng, qtype):
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    n_blocks = COLS // block_elems
    raw = rng.integers(0, 256, size=(ROWS, n_blocks, block_bytes), dtype=np.uint8)
    d_fields, m_fields = HALF_FIELDS[qtype]
    for offset in d_fields:
        d = rng.uniform(0.001, 0.05, size=(ROWS, n_blocks)).astype(np.float16)
        raw[:, :, offset:offset + 2] = d.view(np.uint8).reshape(ROWS, n_blocks, 2)
    for offset in m_fields:
        m = rng.uniform(-0.1, 0.1, size=(ROWS, n_blocks)).astype(np.float16)
        raw[:, :, offset:offset + 2] = m.view(np.uint8).reshape(ROWS, n_blocks, 2)
    return raw.reshape(ROWS, n_blocks * block_bytes)


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/gguf")
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261122)
    writer = gguf.GGUFWriter(str(out / "formats.gguf"), "test")
    # Metadata of every value type (the reader test checks these).
    writer.add_uint8("test.u8", 200)
    writer.add_int8("test.i8", -100)
    writer.add_uint16("test.u16", 60000)
    writer.add_int16("test.i16", -30000)
    writer.add_uint32("test.u32", 4000000000)
    writer.add_int32("test.i32", -2000000000)
    writer.add_float32("test.f32", 0.25)
    writer.add_bool("test.bool", True)
    writer.add_string("test.string", "héllo")
    writer.add_uint64("test.u64", 10000000000000000000)
    writer.add_int64("test.i64", -9000000000000000000)
    writer.add_float64("test.f64", -1.5e300)
    writer.add_array("test.strings", ["a", "", "xyz"])
    writer.add_array("test.ints", [1, -2, 3])
    writer.add_array("test.floats", [0.5, -1.0])
    writer.add_array("test.nested", [[1, 2], [3]])

    tensors = {}
    plain = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    tensors["f32"] = (plain, T.F32)
    tensors["f16"] = (plain.astype(np.float16), T.F16)
    bf16 = (plain.view(np.uint32) >> 16).astype(np.uint16)  # truncation keeps it simple
    tensors["bf16"] = (bf16.view(np.uint8).reshape(ROWS, COLS * 2), T.BF16)
    for qtype in HALF_FIELDS:
        tensors[qtype.name.lower()] = (random_blocks(rng, qtype), qtype)
    for name, (data, qtype) in tensors.items():
        if qtype in (T.F32, T.F16):
            writer.add_tensor(name, data)
        else:
            writer.add_tensor(name, data, raw_dtype=qtype)
        values = dequantize(data, qtype).astype(np.float32)
        assert values.shape == (ROWS, COLS), (name, values.shape)
        np.save(out / f"dequant_{name}.npy", values)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {len(tensors)} tensors to {out}")


if __name__ == "__main__":
    main()
