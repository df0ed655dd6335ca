#!/usr/bin/env python3
"""Re-quantises every 2-D weight of a GGUF file to one ggml type with gguf-py (dequantise to
float32, quantise again), keeping all metadata, for perplexity comparisons between formats.

    python tools/gguf/requantize.py IN.gguf OUT.gguf TYPE      # TYPE: F16, Q8_0, Q5_0, Q4_0, ...
"""
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T, GGUFValueType as V
from gguf.quants import dequantize, quantize


def main():
    src, dst, type_name = sys.argv[1], sys.argv[2], sys.argv[3]
    qtype = T[type_name]
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(dst, arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == V.ARRAY else None
        writer.add_key_value(name, field.contents(), vtype, sub_type=sub)
    for t in reader.tensors:
        shape = tuple(int(d) for d in reversed(t.shape))  # rows first
        values = dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32)
        if values.ndim == 1 or qtype == T.F32:
            writer.add_tensor(t.name, values)
        elif qtype == T.F16:
            writer.add_tensor(t.name, values.astype(np.float16))
        else:
            writer.add_tensor(t.name, quantize(values, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
