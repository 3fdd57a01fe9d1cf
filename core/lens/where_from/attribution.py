"""Direct attribution: the answer's logit at the last position as a sum over the embeddings, each head, each
attention output bias, each MLP and the final LayerNorm's bias, with the LayerNorm's scale frozen at its value in
this pass (TransformerLens's `decompose_resid` + `apply_ln_to_stack`): the pieces add up to the logit."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.lens.trace import Trace
from core.lens.where_from.question import WhereFromError, logit_softcap, readout_of, unembed_bias
from core.model.readout import is_centered, norm_label
from core.text import quoted_token

AGAINST_LISTED = 3  # heads named in the attribution sentence (the CSV and the bars have every one)
BARS_SHOWN = 20  # the chart's bars: the pieces largest in absolute value
LARGEST_NAMED = 3  # bars the sentence names


def bar_order(values, top: int = BARS_SHOWN) -> np.ndarray:
    """The pieces a chart of the attribution draws and their order, top to bottom: the `top` largest in absolute
    value, from the most positive to the most negative (core.figures.where_from.attribution_bars draws these, and
    the sentence names the largest of them in this order)."""
    values = np.asarray(values, dtype=float)
    order = np.argsort(-np.abs(values), kind="stable")[:top]
    return order[np.argsort(-values[order], kind="stable")]


@dataclass
class Attribution:
    names: list[str]  # "embeddings", "L0 H0", ..., "L0 attention bias", "MLP 0", ..., "final LayerNorm bias"
    kinds: list[str]  # "embeddings" | "head" | "attention bias" | "MLP" | "LayerNorm bias"
    layers: list[int | None]
    values: np.ndarray  # each piece's share of the answer's logit
    logit: float  # the model's own logit for the answer at the last position
    answer_piece: str
    position: int
    norm: str = "LayerNorm"  # the final norm whose scale is frozen: "LayerNorm" or "RMSNorm"
    softcap: float | None = None  # the model caps its logits: `logit` is before the cap, `capped` after it
    capped: float | None = None

    @property
    def total(self) -> float:
        return float(self.values.sum())

    def by_layer(self) -> dict[str, float]:
        """'embeddings', 'attention 0' (its heads plus its bias), 'MLP 0', ..., 'final LayerNorm bias'."""
        out: dict[str, float] = {}
        for name, kind, layer, value in zip(self.names, self.kinds, self.layers, self.values):
            key = f"attention {layer}" if kind in ("head", "attention bias") else name
            out[key] = out.get(key, 0.0) + float(value)
        return out

    def sentence(self) -> str:
        """The logit, the chart's largest bars (the LARGEST_NAMED pieces largest in absolute value, named in the
        chart's order, top to bottom), and the heads that push against the answer (the count is of them all; the
        strongest AGAINST_LISTED are named, and the sentence says so when that is fewer)."""
        largest = set(np.argsort(-np.abs(self.values), kind="stable")[:LARGEST_NAMED].tolist())
        top = ", ".join(f"{self.names[i]} {self.values[i]:+.2f}" for i in bar_order(self.values) if i in largest)
        against = sorted((float(v), k) for k, v, kind in zip(self.names, self.values, self.kinds, strict=True)
                         if v < 0 and kind == "head")  # the strongest push first
        names = [k for _, k in against[:AGAINST_LISTED]]
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1] if names else ""
        if len(against) > len(names):
            tail = f"; {len(against)} heads push against it, the strongest {len(names)} of them {listed}"
        else:
            tail = (f"; 1 head pushes against it ({listed})" if len(against) == 1 else
                    f"; {len(against)} heads push against it ({listed})" if against else "")
        capped = "" if self.softcap is None else (
            f" before the model's soft cap ({self.softcap:g} tanh(logit / {self.softcap:g}) = {self.capped:.2f})")
        return (f"The logit of {quoted_token(self.answer_piece)}{capped} is {self.logit:.2f}, the sum of the pieces "
                f"(the final {self.norm}'s scale frozen at its value in this pass). Largest bars, top to bottom: "
                f"{top}{tail}.")

    def rows(self) -> list[dict]:
        return [{"piece": n, "kind": k, "layer": "" if la is None else la, "logit contribution": float(v)}
                for n, k, la, v in zip(self.names, self.kinds, self.layers, self.values)]


def direct_attribution(model, rec: Trace, answer_id: int, position: int = -1, answer_piece: str = "") -> Attribution:
    """The answer's logit at `position` split over the stream's pieces through the frozen final LayerNorm:
    piece c contributes W_U[a] . (gamma * (c - mean(c)) / scale), the LayerNorm's bias W_U[a] . beta. An RMSNorm
    does not centre: c contributes W_U[a] . (gamma * c / scale); an output head's bias adds its b[a]."""
    ln, unembed = readout_of(model)
    acts = rec.activations
    if acts.head_out is None or acts.mlp_out is None or acts.final_scale is None:
        raise WhereFromError("This architecture does not add its sublayers' outputs into one residual stream "
                             "(a post-norm encoder), so its logit has no direct attribution.")
    t = position % rec.n_tokens
    gamma = ln.weight.detach().double().cpu().numpy() if ln.weight is not None else 1.0
    beta = ln.bias.detach().double().cpu().numpy() if ln.bias is not None else None
    w = unembed[answer_id].detach().double().cpu().numpy()  # (C,)
    direction = gamma * w / float(acts.final_scale[t])

    centered = is_centered(ln)

    def share(c: np.ndarray) -> float:
        c = c.astype(np.float64)
        return float(((c - c.mean()) if centered else c) @ direction)

    names, kinds, layers, values = ["embeddings"], ["embeddings"], [None], [share(acts.resid_pre[0, t])]
    n_layer, n_head = acts.head_out.shape[:2]
    for layer in range(n_layer):
        for head in range(n_head):
            names.append(f"L{layer} H{head}")
            kinds.append("head")
            layers.append(layer)
            values.append(share(acts.head_out[layer, head, t]))
        if acts.attn_bias is not None:
            names.append(f"L{layer} attention bias")
            kinds.append("attention bias")
            layers.append(layer)
            values.append(share(acts.attn_bias[layer]))
        names.append(f"MLP {layer}")
        kinds.append("MLP")
        layers.append(layer)
        values.append(share(acts.mlp_out[layer, t]))
    if beta is not None:
        names.append("final LayerNorm bias")
        kinds.append("LayerNorm bias")
        layers.append(None)
        values.append(float(beta @ w))
    head_bias = unembed_bias(model)
    if head_bias is not None:
        names.append("output head bias")
        kinds.append("head bias")
        layers.append(None)
        values.append(float(head_bias[answer_id].detach()))
    logit = float(rec.logits[0, t, answer_id]) if rec.logits.dim() == 3 else float("nan")
    cap, capped = logit_softcap(model), None
    if cap is not None:  # the pieces add up to the logit before the cap: that one, read through the model's own norm
        capped = logit
        with torch.inference_mode():
            x = torch.from_numpy(acts.resid_post[-1, t]).to(unembed.device, unembed.dtype)  # (C,)
            logit = float(ln(x) @ unembed[answer_id]) + (0.0 if head_bias is None else float(head_bias[answer_id]))
    return Attribution(names=names, kinds=kinds, layers=layers, values=np.asarray(values), logit=logit,
                       answer_piece=answer_piece or str(answer_id), position=t, norm=norm_label(ln), softcap=cap,
                       capped=capped)

