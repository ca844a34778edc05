"""The default encoder (all-MiniLM-L6-v2) through ONNX Runtime against PyTorch on CPU (issue 28 point 4).

sentence-transformers' own ONNX / OpenVINO backends need ``optimum``, which this environment's transformers
rules out (benchmarks/BENCHMARKS.md), so the model is exported here with ``torch.onnx.export`` (the
TorchScript exporter): the BERT encoder, mean pooling over the attention mask and L2 normalization in one
graph, the same computation as the SentenceTransformer's modules.
``onnxruntime.quantization.quantize_dynamic``
then makes an int8 copy (weights int8, activations quantized on the fly).

``measure`` encodes the same passages (the demo index's first ``--passages`` rows, as the build encodes them:
``title\\ntext``) with batch 64 through each runtime, texts sorted by length as sentence-transformers does,
2 threads each, and reports passages/s (wall) and passages per CPU-second (the process's CPU time, the
comparable number on a shared machine), the cosine between each runtime's vector and PyTorch's for the same
passage, and recall@10 of HoVer dev claims (encoded by the same runtime) searched among those passages,
against PyTorch's top 10. One JSON line per result (``--out FILE`` appends them there too).

    nice -n 15 python benchmarks/onnx_encoder.py export --work ~/.veracity/bench/onnx
    nice -n 15 python benchmarks/onnx_encoder.py measure --work ~/.veracity/bench/onnx --passages 2000
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np

from index_build import _emit  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

BATCH = 64


def _model():
    from veracity.models.encoders import load_encoder

    enc = load_encoder(None, device="cpu")
    return enc, enc.model[0].auto_model, enc.model.tokenizer


def cmd_export(args) -> None:
    import torch

    enc, bert, tok = _model()

    class Pooled(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    args.work.mkdir(parents=True, exist_ok=True)
    fp32 = args.work / "minilm-fp32.onnx"
    sample = tok(["a short example", "and a second, longer example text"], padding=True, return_tensors="pt")
    model = Pooled(bert).eval()
    t0 = time.perf_counter()
    with torch.no_grad():
        torch.onnx.export(model, (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"]),
                          str(fp32),
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["embedding"],
                          dynamic_axes={n: {0: "batch", 1: "seq"} for n in ("input_ids", "attention_mask",
                                                                           "token_type_ids")}
                          | {"embedding": {0: "batch"}},
                          opset_version=17, dynamo=False)
    from onnxruntime.quantization import QuantType, quantize_dynamic

    int8 = args.work / "minilm-int8.onnx"
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    _emit({"what": "export", "fp32": str(fp32), "fp32_bytes": fp32.stat().st_size, "int8": str(int8),
           "int8_bytes": int8.stat().st_size, "seconds": round(time.perf_counter() - t0, 1)}, args.out)


def _passages(n: int) -> list[str]:
    store = Path(os.environ.get("VERACITY_HOME",
                                Path.home() / ".veracity")) / "indexes" / "demo" / "passages.sqlite"
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT title, text FROM passages ORDER BY idx LIMIT ?", (n,)).fetchall()
    return [f"{t}\n{x}" for t, x in rows]


def _claims(n: int) -> list[str]:
    data = Path(os.environ.get("VERACITY_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))
    claims = json.loads((data / "hover" / "hover_dev_release_v1.1.json").read_text())
    return [c["claim"] for c in claims[:n]]


def _ort_encoder(path: Path, tok, max_len: int, threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])

    def encode(texts: list[str]) -> np.ndarray:
        order = np.argsort([-len(t) for t in texts], kind="stable")  # as sentence-transformers: by length
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for i in range(0, len(texts), BATCH):
            idx = order[i:i + BATCH]
            enc = tok([texts[j] for j in idx], padding=True, truncation=True, max_length=max_len,
                      return_tensors="np")
            feed = {k: enc[k].astype(np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}
            out[idx] = sess.run(["embedding"], feed)[0]
        return out

    return encode


def _timed(encode, texts: list[str]) -> tuple[np.ndarray, float, float]:
    c0, t0 = time.process_time(), time.perf_counter()
    vecs = encode(texts)
    return vecs, time.perf_counter() - t0, time.process_time() - c0


def _recall(p_ref, q_ref, p, q, k: int = 10) -> float:
    top_ref = np.argsort(-(q_ref @ p_ref.T), axis=1)[:, :k]
    top = np.argsort(-(q @ p.T), axis=1)[:, :k]
    return float(np.mean([len(set(a) & set(b)) / k for a, b in zip(top_ref, top, strict=True)]))


def cmd_measure(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    enc, _, tok = _model()
    passages, claims = _passages(args.passages), _claims(args.queries)
    runtimes = {"torch": lambda texts: enc.encode(texts, batch_size=BATCH)}
    for name in ("fp32", "int8"):
        path = args.work / f"minilm-{name}.onnx"
        if path.exists():
            runtimes[f"onnx-{name}"] = _ort_encoder(path, tok, enc.max_seq_length, args.threads)
    for fn in runtimes.values():  # warm-up: first-call allocations out of the timing
        fn(passages[:BATCH])
    vectors = {}
    for rnd in range(args.rounds):  # interleaved rounds: a change in the machine's load hits every runtime
        for name, fn in runtimes.items():
            p, wall, cpu = _timed(fn, passages)
            q = fn(claims)
            vectors[name] = (p, q)
            rec = {"what": "encode", "runtime": name, "round": rnd, "passages": len(passages), "batch": BATCH,
                   "threads": args.threads, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                   "passages_per_s": round(len(passages) / wall, 2),
                   "passages_per_cpu_s": round(len(passages) / cpu, 2), "load_avg": os.getloadavg()}
            if name != "torch":
                p_ref, q_ref = vectors["torch"]
                cos = np.sum(p * p_ref, axis=1)
                rec.update({"cosine_mean": round(float(cos.mean()), 6), "cosine_min": round(float(cos.min()),
                                                                                            6),
                            "recall_at_10_vs_torch": round(_recall(p_ref, q_ref, p, q), 4),
                            "queries": len(claims)})
            _emit(rec, args.out)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cmd", choices=["export", "measure"])
    p.add_argument("--work", type=Path, default=Path.home() / ".veracity" / "bench" / "onnx")
    p.add_argument("--passages", type=int, default=2000)
    p.add_argument("--queries", type=int, default=200, help="HoVer dev claims for recall@10")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    {"export": cmd_export, "measure": cmd_measure}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
