"""The logit lens (nostalgebraist 2020): the residual stream after the embeddings and after each block, read
through the final LayerNorm and the output head: per (layer, position) the top piece, and the probability and rank
of the answer's first piece; the last row is the model's own output."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.lens.attention import piece_label
from core.lens.trace import Trace
from core.lens.where_from.question import logit_softcap, readout_of, unembed_bias
from core.model.readout import norm_label
from core.text import quoted_token


@dataclass
class LogitLens:
    layers: list[str]  # "embeddings", "after layer 0", ...
    tokens: list[str]
    top_ids: np.ndarray  # (L + 1, T)
    top_pieces: list[list[str]]  # (L + 1) x T display labels
    top_prob: np.ndarray  # (L + 1, T)
    answer_prob: np.ndarray  # (L + 1, T): the answer's first piece
    answer_rank: np.ndarray  # (L + 1, T): 1 = the top piece
    probs_last: np.ndarray  # (L + 1, V) the whole distribution at the last position (float64)
    answer_piece: str
    norm: str = "LayerNorm"  # the final norm read through: "LayerNorm" or "RMSNorm"

    @property
    def first_top_layer(self) -> int | None:
        """The first row (0 = embeddings) where the answer is the top piece at the last position."""
        top = np.flatnonzero(self.answer_rank[:, -1] == 1)
        return int(top[0]) if top.size else None

    def sentence(self) -> str:
        row = self.first_top_layer
        piece = self.answer_piece
        if row is None:
            rank, p = int(self.answer_rank[-1, -1]), float(self.answer_prob[-1, -1])
            return (f"{quoted_token(piece)} never becomes the top piece at the last position: after the last layer it "
                    f"ranks {rank} with probability {p:.3f}, and the model's top piece is "
                    f"{quoted_token(self.top_pieces[-1][-1])}.")
        where = "already in the embeddings" if row == 0 else f"after layer {row - 1}"
        return (f"{quoted_token(piece)} first becomes the top piece at the last position {where} (probability "
                f"{self.answer_prob[row, -1]:.3f}); after the last layer its probability is "
                f"{self.answer_prob[-1, -1]:.3f}.")

    def rows(self) -> list[dict]:
        out = []
        for layer, name in enumerate(self.layers):
            for t, token in enumerate(self.tokens):
                out.append({"layer": name, "position": t, "token": token, "top piece": self.top_pieces[layer][t],
                            "top probability": float(self.top_prob[layer, t]),
                            "answer probability": float(self.answer_prob[layer, t]),
                            "answer rank": int(self.answer_rank[layer, t])})
        return out


def streams(acts) -> np.ndarray:
    """(L + 1, T, C): the embeddings, then the stream after each block."""
    return np.concatenate([acts.resid_pre[:1], acts.resid_post])


def read_through(model, x: np.ndarray | torch.Tensor, pieces: list[int] | None = None) -> torch.Tensor:
    """Residual states (..., C) read through the model's final LayerNorm and output head -> float64 logits (..., V)
    on the CPU, soft-capped as the model caps its own output; `pieces`: only those pieces' logits (..., len(pieces)).
    Raises WhereFromError (one sentence) for a model without a final norm and output head."""
    ln, unembed = readout_of(model)
    bias = unembed_bias(model)
    if pieces is not None:
        unembed = unembed[pieces]
        bias = None if bias is None else bias[pieces]
    with torch.inference_mode():
        x = (torch.from_numpy(x) if isinstance(x, np.ndarray) else x).to(unembed.device, unembed.dtype)
        logits = ln(x) @ unembed.T
        logits = (logits if bias is None else logits + bias).double().cpu()
        cap = logit_softcap(model)
        if cap is not None:  # read out as the model reads its own output
            logits = cap * torch.tanh(logits / cap)
    return logits


def logit_lens(model, tokenizer, rec: Trace, answer_id: int) -> LogitLens:
    ln, _ = readout_of(model)
    acts = rec.activations
    logits = read_through(model, streams(acts))  # (L + 1, T, V)
    probs = torch.softmax(logits, dim=-1)
    top_prob, top_ids = probs.max(dim=-1)
    answer_logit = logits[..., answer_id]
    rank = (logits > answer_logit[..., None]).sum(-1) + 1
    labels = {int(i): piece_label(tokenizer, int(i)) for i in top_ids.unique().tolist()}
    n_layer = acts.resid_post.shape[0]
    return LogitLens(layers=["embeddings"] + [f"after layer {i}" for i in range(n_layer)], tokens=rec.tokens,
                     top_ids=top_ids.numpy(), top_pieces=[[labels[int(i)] for i in row] for row in top_ids.tolist()],
                     top_prob=top_prob.numpy(), answer_prob=probs[..., answer_id].numpy(), answer_rank=rank.numpy(),
                     probs_last=probs[:, -1].numpy(), answer_piece=piece_label(tokenizer, answer_id),
                     norm=norm_label(ln))

