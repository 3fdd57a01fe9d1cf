"""Input attribution: gradient x input and integrated gradients (zero token-embedding baseline, positions kept,
`steps` midpoints, the target piece held fixed) for the answer's log-probability, per input piece."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from core.lens.trace import model_device
from core.lens.where_from.question import Question, WhereFromError, patchable
from core.lens.where_from.tracing import last_logits
from core.model.hooks import Hooks

IG_STEPS = 30


@dataclass
class InputAttribution:
    tokens: list[str]
    gradient_x_input: np.ndarray  # (T,)
    integrated_gradients: np.ndarray  # (T,)
    log_prob: float  # the answer's log-probability on the question
    baseline_log_prob: float  # with every token embedding zero (positions kept)
    steps: int
    answer_piece: str

    @property
    def completeness_gap(self) -> float:
        """Integrated gradients add up to log p(x) - log p(baseline) up to the Riemann sum's error."""
        return float(self.integrated_gradients.sum() - (self.log_prob - self.baseline_log_prob))

    def rows(self) -> list[dict]:
        return [{"position": t, "token": tok, "gradient x input": float(g), "integrated gradients": float(i)}
                for t, (tok, g, i) in enumerate(zip(self.tokens, self.gradient_x_input, self.integrated_gradients))]


class _Scale(Hooks):
    def __init__(self, embedded: torch.Tensor) -> None:
        self.embedded = embedded

    def embed(self, x):
        return self.embedded


def integrated_gradients(model, ids: Sequence[int], score, steps: int = IG_STEPS, embed=None
                         ) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(gradient x input (T,), integrated gradients (T,), score of the input, score of the baseline) of a scalar
    per batch row, `score(model, idx, hooks) -> (B,)` (a log-probability), over the token embeddings: zero
    baseline, positions kept, midpoint rule with `steps` points, one batched pass. Shared by the question view
    (the answer's first piece) and the error analysis (a classifier's class). `embed`: the token embedding to
    scale (default the model's `tok_emb`, patched through its hook points; a score given `embed` reads the scaled
    embeddings from its hooks' `embedded` itself, as a Hugging Face classifier's inputs_embeds)."""
    if embed is None and not patchable(model):
        raise WhereFromError("Input attribution patches a pre-norm decoder's embeddings through its hook points; "
                             "this model has none.")
    device = model_device(model)
    idx = torch.tensor([list(ids)], dtype=torch.long, device=device)  # (1, T)
    with torch.no_grad():
        x = (model.tok_emb if embed is None else embed)(idx).detach()  # (1, T, C)
    alphas = torch.cat([torch.ones(1), (torch.arange(steps, dtype=torch.float32) + 0.5) / steps,
                        torch.zeros(1)]).to(device)  # the input itself, the midpoints, the baseline
    with torch.enable_grad():
        scaled = (alphas.view(-1, 1, 1) * x).requires_grad_(True)  # (steps + 2, T, C)
        scores = score(model, idx.expand(len(alphas), -1), _Scale(scaled))  # (steps + 2,)
        (grads,) = torch.autograd.grad(scores.sum(), scaled)
    scores = scores.detach()
    grads = grads.double()
    gxi = (grads[0] * x[0].double()).sum(-1)
    ig = (grads[1:-1].mean(0) * x[0].double()).sum(-1)
    return gxi.cpu().numpy(), ig.cpu().numpy(), float(scores[0]), float(scores[-1])


def input_attribution(model, q: Question, steps: int = IG_STEPS, tokens: list[str] | None = None
                      ) -> InputAttribution:
    """Gradient x input and integrated gradients of log p(answer's first piece | question) per input piece,
    over the token embeddings (zero baseline, positions kept, midpoint rule with `steps` points)."""
    def answer_log_prob(model, idx, hooks):
        return torch.log_softmax(last_logits(model, idx, hooks).double(), -1)[:, q.answer_id]

    gxi, ig, log_prob, baseline = integrated_gradients(model, q.ids, answer_log_prob, steps)
    return InputAttribution(tokens=tokens if tokens is not None else q.tokens, gradient_x_input=gxi,
                            integrated_gradients=ig, log_prob=log_prob, baseline_log_prob=baseline, steps=steps,
                            answer_piece=q.answer_piece)
