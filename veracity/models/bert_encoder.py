"""A plain-BERT sentence encoder in torch alone: what sentence-transformers computes for a folder whose
modules are Transformer (a ``bert`` model) -> Pooling (mean or CLS) [-> Normalize], as all-MiniLM-L6-v2 is,
without importing sentence-transformers or transformers.

Why: on the 2-core CPU machine ``import sentence_transformers`` takes about 10 s of CPU (it imports
transformers, scikit-learn, SciPy and datasets), and ``transformers.AutoModel`` about 11 s; torch, the
``tokenizers`` library and safetensors together about 2.5 s. Every process that searches a dense index or
builds one (``verify``, ``check``, ``index build``, each Ray actor) paid those seconds before its first search
(BENCHMARKS.md, "Process start-up"). The vectors are the same as sentence-transformers' (checked against it,
tests/integration/test_methods_memory_encoder.py); a folder of any other layout is loaded by
sentence-transformers.

The forward pass is BERT's (Devlin et al., 2019): embeddings (word + absolute position + token type 0,
LayerNorm), then per layer self-attention with the padding masked, residual + LayerNorm, a GELU feed-forward,
residual + LayerNorm; dropout is off (inference). Texts are stripped, tokenized with the folder's
``tokenizer.json`` (its normalizer and [CLS]/[SEP] template), truncated to ``max_seq_length``, sorted by
length and batched, as sentence-transformers does; the pooled vectors are L2-normalized, as veracity always
asks of sentence-transformers (``normalize_embeddings=True``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"


def plain_bert_layout(path: Path) -> dict | None:
    """The folder's settings when it is a sentence-transformers folder this module computes exactly
    (modules Transformer at the root -> Pooling mean or CLS [-> Normalize], a ``bert`` model with absolute
    positions and a GELU, safetensors weights, a fast-tokenizer file), else None."""
    try:
        modules = json.loads((path / "modules.json").read_text())
        config = json.loads((path / "config.json").read_text())
        types = [m["type"] for m in modules]
        if (types not in ([_TRANSFORMER, _POOLING], [_TRANSFORMER, _POOLING, _NORMALIZE])
                or modules[0]["path"]):
            return None
        pooling = json.loads((path / modules[1]["path"] / "config.json").read_text())
        st = json.loads((path / "sentence_bert_config.json").read_text())
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode_") and v}
    if modes == {"pooling_mode_mean_tokens"}:
        mode = "mean"
    elif modes == {"pooling_mode_cls_token"}:
        mode = "cls"
    else:
        return None
    if (config.get("model_type") != "bert" or config.get("hidden_act") != "gelu"
            or config.get("position_embedding_type", "absolute") != "absolute" or st.get("do_lower_case")
            or not (path / "model.safetensors").is_file() or not (path / "tokenizer.json").is_file()):
        return None
    return {"config": config, "pooling": mode,
            "max_seq_length": int(st.get("max_seq_length") or config["max_position_embeddings"])}


class BertSentenceEncoder:
    """``encode(texts)`` of a plain-BERT sentence-transformers folder (:func:`plain_bert_layout`), on CPU."""

    def __init__(self, path: Path, layout: dict):
        import torch
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        self._torch = torch
        cfg = layout["config"]
        self.heads, self.eps = int(cfg["num_attention_heads"]), float(cfg.get("layer_norm_eps", 1e-12))
        self.layers = int(cfg["num_hidden_layers"])
        self.pooling = layout["pooling"]
        self.max_seq_length = min(layout["max_seq_length"], int(cfg["max_position_embeddings"]))
        weights = load_file(str(path / "model.safetensors"))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
        self.w = {k[len(prefix):]: v.float() for k, v in weights.items() if k.startswith(prefix)}
        self.dimension = int(self.w["embeddings.word_embeddings.weight"].shape[1])
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)

    def _layer_norm(self, x, name: str):
        return self._torch.nn.functional.layer_norm(x, (x.shape[-1],), self.w[f"{name}.weight"],
                                                    self.w[f"{name}.bias"], self.eps)

    def _linear(self, x, name: str):
        return self._torch.nn.functional.linear(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"])

    def _forward(self, ids, mask):
        F = self._torch.nn.functional
        w = self.w
        n, length = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:length].unsqueeze(0)
             + w["embeddings.token_type_embeddings.weight"][0])
        x = self._layer_norm(x, "embeddings.LayerNorm")
        head_dim = x.shape[-1] // self.heads
        keep = mask.bool()[:, None, None, :]  # (n, 1, 1, L): padding never attended to
        for i in range(self.layers):
            p = f"encoder.layer.{i}"

            def split(t):
                return t.view(n, length, self.heads, head_dim).transpose(1, 2)

            q = split(self._linear(x, f"{p}.attention.self.query"))
            k = split(self._linear(x, f"{p}.attention.self.key"))
            v = split(self._linear(x, f"{p}.attention.self.value"))
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=1 / math.sqrt(head_dim))
            ctx = ctx.transpose(1, 2).reshape(n, length, -1)
            x = self._layer_norm(self._linear(ctx, f"{p}.attention.output.dense") + x,
                                 f"{p}.attention.output.LayerNorm")
            h = F.gelu(self._linear(x, f"{p}.intermediate.dense"))
            x = self._layer_norm(self._linear(h, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
        if self.pooling == "cls":
            out = x[:, 0]
        else:
            m = mask.unsqueeze(-1).to(x.dtype)
            out = (x * m).sum(1) / m.sum(1).clamp(min=1e-9)
        # always: veracity's vectors are L2-normalized (inner product: cosine)
        return F.normalize(out, p=2, dim=1)

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        torch = self._torch
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        encs = self.tokenizer.encode_batch([str(t).strip() for t in texts])
        order = sorted(range(len(encs)), key=lambda i: -len(encs[i].ids))  # similar lengths batched together
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                idx = order[start:start + batch_size]
                width = max(len(encs[i].ids) for i in idx)
                ids = torch.zeros((len(idx), width), dtype=torch.long)
                mask = torch.zeros((len(idx), width), dtype=torch.long)
                for row, i in enumerate(idx):
                    tok = encs[i].ids
                    ids[row, :len(tok)] = torch.tensor(tok, dtype=torch.long)
                    mask[row, :len(tok)] = 1
                out[idx] = self._forward(ids, mask).numpy()
        return out
