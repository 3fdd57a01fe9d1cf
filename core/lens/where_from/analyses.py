"""Where an answer comes from: logit lens, direct attribution, causal tracing and input attribution.

Everything starts from one `Trace` with activations (core.lens.trace) and patches the model only through its
hook points (core.model.hooks): no second implementation of the model.

- `logit_lens`: the residual stream after the embeddings and after each block, read through the final LayerNorm
  and the output head (nostalgebraist 2020): per (layer, position) the top piece, and the probability and rank of
  the answer's first piece; the last row is the model's own output.
- `direct_attribution`: the answer's logit at the last position as a sum over the embeddings, each head, each
  attention output bias, each MLP and the final LayerNorm's bias, with the LayerNorm's scale frozen at its value
  in this pass (TransformerLens's `decompose_resid` + `apply_ln_to_stack`): the pieces add up to the logit.
- `causal_trace`: ROME (Meng et al. 2022), with Zhang & Nanda 2023's best practice: corrupt the subject (the
  name's pieces) by Gaussian noise of `noise` x the standard deviation of those pieces' token embeddings (a fixed
  seed, the mean over `samples` draws) or by symmetric token replacement with another person's name of the same
  number of pieces; restore one clean state at one (layer, position) for the residual stream, the attention
  output and the MLP output; measure the answer's probability or the logit difference against the corrupted
  run's answer. Every restored run of one question is one batched forward pass. With 4 layers or fewer the
  window is one layer (ROME's window of 10 would restore the whole model at once). The last layer at a position
  before the last cannot reach the answer: those cells are marked and are exactly 0.
- `input_attribution`: gradient x input and integrated gradients (zero token-embedding baseline, positions
  kept, `steps` midpoints, the target piece held fixed) for the answer's log-probability, per input piece.

The dev-set averages are in `core.lens.where_from.dev_set`; the command line in `core.lens.where_from.cli`.

For a fabricated name there is no true answer: every view then traces the model's own first piece, and
`Question.note` says what that means.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from core.lens.probe.questions import name_from_question
from core.lens.trace import Trace, TraceError, cut_to_limit, model_device, trace
from core.model.attention import KVCache
from core.model.hooks import Hooks, Recorder
from core.model.readout import is_centered, norm_label
from core.model.tokenizer import MASK_CHAR
from core.model.transformer import Transformer
from core.text import visible_token

KINDS = ("residual", "attention", "MLP")
CORRUPTIONS = ("noise", "swap", "none")
METRICS = ("probability", "logit difference")
POSITION_CLASSES = ("before the name", "name's first piece", "name's middle pieces", "name's last piece",
                    "after the name", "last position")
NOISE = 3.0  # ROME: 3 standard deviations of the subject's embeddings
SAMPLES = 10  # ROME's number of noise draws
SEED = 0
IG_STEPS = 30
SMALL_MODEL_LAYERS = 4  # up to this many layers, restore one layer at a time
ROME_WINDOW = 10
AGAINST_LISTED = 3  # heads named in the attribution sentence (the CSV and the bars have every one)
NOTHING_CORRUPTED = 1e-6  # a total effect smaller than this: the corruption changed nothing
# A total effect below this (in the metric's unit) is too small for shares of it to mean anything: a model that
# gives the answer 1.6% before and 1.4% after the corruption (birth-vanilla-scratch) has nothing to trace.
WEAK_EFFECT = {"probability": 0.05, "logit difference": 1.0}


# A grid teaches where an answer is held only when some single restored state brings a real share of it back.
# Below this share, the grid is almost white: on the bundled birth-vanilla-pretrained with the page's 10 noise
# draws on the name, the first dev person (Salomé Quintanilla Guijarro, the probe's opening question) loses 0.383 of
# the answer's probability and no state brings back more than 1%; Nela Švecová 6%, where swapping in another name
# brings back 57%. Of the first 60 dev questions these two fall below 10% (tests/test_where_from.py measures it).
LOCALISED_SHARE = 0.10


def weak_effect_note(metric: str, clean: float, corrupted: float) -> str:
    """One sentence when the corruption barely moved the answer (shares of a tiny effect are noise); else ''."""
    total = clean - corrupted
    if abs(total) >= WEAK_EFFECT.get(metric, 0.0):
        return ""
    return (f" Careful: the corruption moves the {metric} by only {total:+.3f} ({clean:.3f} clean), so these shares "
            "are shares of almost nothing: the model did not hold this answer to begin with.")


class WhereFromError(ValueError):
    """Input these views cannot trace; str() is one sentence for the user."""


# --------------------------------------------------------------------------- the question read


@dataclass
class Question:
    """A prompt as the model reads it, where the name is in it, and which piece counts as the answer."""

    question: str
    ids: list[int]  # question + MASK, cut from the front to the model's context
    tokens: list[str]  # display labels
    raw: list[str]  # the text each piece covers
    name: str
    name_positions: list[int]  # positions of the name's pieces (empty: no name found)
    answer_id: int  # the first piece of the answer
    answer_piece: str  # its display label
    truth: str | None  # the true birthplace, None when unknown (a fabricated name)
    own_answer: bool  # True: the answer traced is the model's own first piece, not a known truth
    cut: int = 0  # pieces dropped from the front

    @property
    def note(self) -> str:
        piece = self.answer_piece
        if self.own_answer:
            return (f"No birthplace is known for {self.name or 'this text'}, so every view traces the model's own "
                    f"first piece {piece!r}: what pushes the model to its guess (pieces of the name that sound "
                    "like a country, the question's wording), not where a stored fact is kept. A trace of a "
                    "guess looks like a trace of a fact; only the true answer tells them apart.")
        return f"The answer traced is the first piece {piece!r} of the true birthplace {self.truth!r}."


def _prompt_pieces(tokenizer, prompt: str) -> tuple[list[int], list[str]]:
    read = tokenizer.tokenize(prompt)
    return read.ids, read.tokens


def name_span(question: str, name: str) -> tuple[int, int] | None:
    start = question.find(name) if name else -1
    return (start, start + len(name)) if start >= 0 else None


def pieces_covering(raw_tokens: Sequence[str], span: tuple[int, int]) -> list[int]:
    """Positions of the pieces whose characters overlap `span` (raw tokens must spell the text in order)."""
    out, at = [], 0
    for i, piece in enumerate(raw_tokens):
        end = at + len(piece)
        if at < span[1] and end > span[0] and piece.strip():
            out.append(i)
        at = end
    return out


def name_pieces(tokenizer, prompt: str, ids: Sequence[int], raw: Sequence[str], span: tuple[int, int]) -> list[int]:
    """Positions of the pieces that spell the name at `span` (whitespace pieces left out): the pieces of the text
    before the name and up to its end, when the tokenizer splits the prompt there (it does at a space); else
    the pieces whose characters overlap the span (when the pieces spell the text); else none."""
    before, upto = tokenizer.encode(prompt[:span[0]]), tokenizer.encode(prompt[:span[1]])
    if list(ids[:len(before)]) == before and list(ids[:len(upto)]) == upto:
        return [p for p in range(len(before), len(upto)) if raw[p].strip()]
    if "".join(raw) == prompt:
        return pieces_covering(raw, span)
    return []


def context_of(model) -> int:
    return model.max_length or model.config.block_size


def answer_piece_id(tokenizer, prompt_ids: list[int], prompt: str, answer: str) -> int:
    """The first piece the model would write for `answer` after the prompt (tokenised in context)."""
    whole = tokenizer.encode(prompt + answer)
    if whole[:len(prompt_ids)] == prompt_ids and len(whole) > len(prompt_ids):
        return whole[len(prompt_ids)]
    alone = tokenizer.encode(answer)
    if not alone:
        raise WhereFromError(f"The answer {answer!r} has no pieces this model can read.")
    return alone[0]


def read_question(model, tokenizer, question: str, truth: str | None = None) -> Question:
    """question ('Where was NAME born?', or any text) + MASK, the name's pieces in it, the answer's first piece:
    the truth's when given, else the model's own top piece after the prompt."""
    question = " ".join((question or "").split()).rstrip(MASK_CHAR)
    if not question:
        raise WhereFromError("Type a question such as 'Where was Ada Lovelace born?'.")
    prompt = question + MASK_CHAR if getattr(tokenizer, "mask_id", None) is not None else question
    tokenized = tokenizer.tokenize(prompt)
    if not tokenized.ids:
        raise WhereFromError("The question has no pieces this model can read.")
    if tokenized.unknown:
        shown = ", ".join(repr(p) for p in tokenized.unknown[:5])
        raise WhereFromError(f"This model's vocabulary lacks {shown}, so what it reads is not the question typed.")
    window = cut_to_limit(len(tokenized.ids), context_of(model), "end")
    ids, raw = tokenized.ids[window], tokenized.tokens[window]
    name = name_from_question(question)
    span = name_span(prompt, name)
    positions = []
    if span is not None:
        found = name_pieces(tokenizer, prompt, tokenized.ids, tokenized.tokens, span)
        positions = [p - window.start for p in found if p >= window.start]
    truth = truth.strip() if truth else None
    if truth:
        answer_id = answer_piece_id(tokenizer, tokenized.ids, prompt, truth)
    else:
        with torch.inference_mode():
            logits, _ = model(torch.tensor([ids], dtype=torch.long, device=model_device(model)))
        answer_id = int(logits[0, -1].argmax())
    return Question(question=question, ids=ids, tokens=[visible_token(t) for t in raw], raw=list(raw), name=name,
                    name_positions=positions, answer_id=answer_id, answer_piece=tokenizer.decode([answer_id]),
                    truth=truth or None, own_answer=not truth, cut=window.start)


def record(model, q: Question) -> Trace:
    """One Trace of the question with activations (the one record every view here reads)."""
    try:
        return trace(model, q.ids, q.raw, activations=True)
    except TraceError as exc:
        raise WhereFromError(str(exc)) from None


def unembed_bias(model) -> torch.Tensor | None:
    """The output head's bias (Phi's has one; ours and most have none)."""
    return getattr(model, "unembed_bias", None)


def logit_softcap(model) -> float | None:
    """The cap a model puts on its output logits, logits = cap * tanh(z / cap) (Gemma 2; core.io.hf), or None."""
    return getattr(model, "logit_softcap", None)


def patchable(model) -> bool:
    """Whether causal tracing and input attribution may patch the model through its hook points: our own
    Transformer, or a Hugging Face pre-norm decoder (core.io.hf)."""
    return isinstance(model, Transformer) or bool(getattr(model, "patchable", False))


def _readout(model):
    try:
        return model.readout()
    except (AttributeError, ValueError) as exc:
        raise WhereFromError(str(exc) if isinstance(exc, ValueError) else
                             "This model has no final LayerNorm and output head to read its stream through.") from None


# --------------------------------------------------------------------------- logit lens


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
            return (f"{piece!r} never becomes the top piece at the last position: after the last layer it ranks "
                    f"{rank} with probability {p:.3f}, and the model's top piece is {self.top_pieces[-1][-1]!r}.")
        where = "already in the embeddings" if row == 0 else f"after layer {row - 1}"
        return (f"{piece!r} first becomes the top piece at the last position {where} (probability "
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


def logit_lens(model, tokenizer, rec: Trace, answer_id: int) -> LogitLens:
    ln, unembed = _readout(model)
    acts = rec.activations
    bias = unembed_bias(model)
    with torch.inference_mode():
        x = torch.from_numpy(streams(acts)).to(unembed.device, unembed.dtype)  # (L + 1, T, C)
        logits = ln(x) @ unembed.T
        logits = (logits if bias is None else logits + bias).double().cpu()  # (L + 1, T, V)
        cap = logit_softcap(model)
        if cap is not None:  # read out as the model reads its own output
            logits = cap * torch.tanh(logits / cap)
    probs = torch.softmax(logits, dim=-1)
    top_prob, top_ids = probs.max(dim=-1)
    answer_logit = logits[..., answer_id]
    rank = (logits > answer_logit[..., None]).sum(-1) + 1
    labels = {int(i): visible_token(tokenizer.decode([int(i)])) for i in top_ids.unique().tolist()}
    n_layer = acts.resid_post.shape[0]
    return LogitLens(layers=["embeddings"] + [f"after layer {i}" for i in range(n_layer)], tokens=rec.tokens,
                     top_ids=top_ids.numpy(), top_pieces=[[labels[int(i)] for i in row] for row in top_ids.tolist()],
                     top_prob=top_prob.numpy(), answer_prob=probs[..., answer_id].numpy(), answer_rank=rank.numpy(),
                     probs_last=probs[:, -1].numpy(), answer_piece=visible_token(tokenizer.decode([answer_id])),
                     norm=norm_label(ln))


# --------------------------------------------------------------------------- direct attribution


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
        """The logit, its three largest parts by layer, and the heads that push against the answer (the count
        is of them all; the strongest AGAINST_LISTED are named, and the sentence says so when that is fewer)."""
        parts = self.by_layer()
        ranked = sorted(parts.items(), key=lambda kv: -abs(kv[1]))
        top = ", ".join(f"{k} {v:+.2f}" for k, v in ranked[:3])
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
        return (f"The logit of {self.answer_piece!r}{capped} is {self.logit:.2f}, the sum of the pieces (the final "
                f"{self.norm}'s scale frozen at its value in this pass). Largest: {top}{tail}.")

    def rows(self) -> list[dict]:
        return [{"piece": n, "kind": k, "layer": "" if la is None else la, "logit contribution": float(v)}
                for n, k, la, v in zip(self.names, self.kinds, self.layers, self.values)]


def direct_attribution(model, rec: Trace, answer_id: int, position: int = -1, answer_piece: str = "") -> Attribution:
    """The answer's logit at `position` split over the stream's pieces through the frozen final LayerNorm:
    piece c contributes W_U[a] . (gamma * (c - mean(c)) / scale), the LayerNorm's bias W_U[a] . beta. An RMSNorm
    does not centre: c contributes W_U[a] . (gamma * c / scale); an output head's bias adds its b[a]."""
    ln, unembed = _readout(model)
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


# --------------------------------------------------------------------------- causal tracing


def last_logits(model, idx: torch.Tensor, hooks: Hooks, shared: int = 0) -> torch.Tensor:
    """(B, V) next-piece logits at the last position of a patched pass (the head applied there only: a grid's
    rows need no other position's logits, and the full (B, T, V) product would be most of the work).

    `shared`: the first positions, equal in every row and never patched (the question before the name: a causal
    model computes them the same in every row). Our Transformer reads them once and every row goes on from their
    keys and values, as generation does; `hooks` then sees positions `shared` onwards only."""
    if shared > 0 and isinstance(model, Transformer):
        caches = [KVCache() for _ in model.blocks]
        model.hidden_states(idx[:1, :shared], caches=caches)  # the shared start, once
        rows = [c.expand(idx.size(0)) for c in caches]
        h, _ = model.hidden_states(idx[:, shared:], start=shared, caches=rows, hooks=hooks)
    else:
        h, _ = model.hidden_states(idx, hooks=hooks)  # (B, T, C) after the final LayerNorm
    return model.head.unembed(h[:, -1])


# rows per group of first restored position below which a trace's batch runs whole: each group is a pass of its own
# (~0.7 ms on the bundled 2-layer models), so ROME's 10 noise samples gain (~95 -> ~60 ms a trace) and one swap or
# uncorrupted sample (a few rows a group) would lose (~20 -> ~27 ms); python -m bench.where_from_profile
GROUP_ROWS = 24


def restored_logits(model, idx: torch.Tensor, restore: _Restore, first: Sequence[int], base: Sequence[int],
                    shared: int = 0) -> torch.Tensor:
    """(B, V) last-position logits of a trace's batch, each row computed only from its first restored position on.

    A causal model computes every position before a row's first restored one (`first[row]`; the row's length for a
    row that restores nothing) exactly as in the unrestored row of the same input (`base[row]`, a row that
    restores nothing, itself for such a row). So the unrestored rows are run once, keeping their keys and values,
    and each group of rows that first restores at position g goes on from g with its base row's keys and values
    before g: a row restoring the last position computes one position, not the question's every one (about half
    of the batch's work for a question of 15 pieces). `restore`'s masks, noise and clean states cover positions
    `shared` onwards (as for `last_logits`). Our own Transformer only, and only when each group has rows enough
    (GROUP_ROWS) to pay for its own pass; otherwise the batch runs whole, as `last_logits`."""
    B, T = idx.shape
    first_t = torch.as_tensor(list(first), dtype=torch.long)
    groups = len(set(first_t.tolist()) - {T})
    if not isinstance(model, Transformer) or B < GROUP_ROWS * max(groups, 1):
        return last_logits(model, idx, restore, shared)
    bases = sorted({int(b) for b in base})
    caches = [KVCache() for _ in model.blocks]
    if shared > 0:
        model.hidden_states(idx[:1, :shared], caches=caches)  # the shared start, once
        caches = [c.expand(len(bases)) for c in caches]
    rows = torch.tensor(bases)
    plain = _Restore(restore.clean, {}, None if restore.noise is None else restore.noise[rows])
    h, _ = model.hidden_states(idx[rows, shared:], start=shared, caches=caches, hooks=plain)
    unrestored = model.head.unembed(h[:, -1])
    out = unrestored.new_empty(B, unrestored.size(-1))
    out[rows] = unrestored
    where = {b: i for i, b in enumerate(bases)}  # a base row -> its place in the base pass's caches
    base_t = torch.tensor([where[int(b)] for b in base])
    for g in sorted({int(f) for f in first_t.tolist()} - {T}):
        group = torch.nonzero(first_t == g).flatten()
        start = max(g, shared)
        kept = [c.rows(base_t[group], start) for c in caches]
        part = _Restore({kind: [x[start - shared:] for x in states] for kind, states in restore.clean.items()},
                        {key: mask[group, start - shared:] for key, mask in restore.masks.items()},
                        None if restore.noise is None else restore.noise[group, start - shared:])
        h, _ = model.hidden_states(idx[group, start:], start=start, caches=kept, hooks=part)
        out[group] = model.head.unembed(h[:, -1])
    return out


class _Restore(Hooks):
    """Patches a batch: each row restores clean states at the (kind, layer, position) cells it lists, and rows
    may carry their own token embeddings (noise on the name's pieces)."""

    def __init__(self, clean: dict[str, list[torch.Tensor]], masks: dict[tuple[str, int], torch.Tensor],
                 embed_noise: torch.Tensor | None) -> None:
        self.clean, self.masks, self.noise = clean, masks, embed_noise

    def embed(self, x):
        return x if self.noise is None else x + self.noise  # (B, T, C) + (B, T, C)

    def _patch(self, kind: str, layer: int, x: torch.Tensor) -> torch.Tensor:
        mask = self.masks.get((kind, layer))
        if mask is None:
            return x
        return torch.where(mask[..., None], self.clean[kind][layer].to(x.dtype)[None], x)

    def attn_out(self, layer, y):
        return self._patch("attention", layer, y)

    def mlp_out(self, layer, y):
        return self._patch("MLP", layer, y)

    def resid_post(self, layer, x):
        return self._patch("residual", layer, x)


@dataclass
class CausalTrace:
    tokens: list[str]
    name_positions: list[int]
    answer_piece: str
    corruption: str  # "noise" | "swap" | "none"
    metric: str  # "probability" | "logit difference"
    noise: float  # multiple of the name pieces' embedding standard deviation (noise only)
    noise_std: float  # that standard deviation
    seed: int
    samples: int
    window: int
    swapped_names: list[str]
    clean: float  # the metric on the clean question
    corrupted: float  # the metric on the corrupted question (mean over samples)
    corrupted_answer: str  # the corrupted run's top piece (logit difference is taken against it)
    scores: dict[str, np.ndarray]  # kind -> (L, T): the metric with that one state restored (mean over samples)
    impossible: np.ndarray  # (L, T) bool: cannot reach the answer by construction (exactly 0 effect)
    # "residual" -> "layer l, name's last piece" | "layer l, all name pieces" | "layer l, last position" -> the
    # share of the total effect that restoring the residual stream there (all those positions at once) brings back
    summary: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def total_effect(self) -> float:
        return self.clean - self.corrupted

    def effect(self, kind: str) -> np.ndarray:
        """Indirect effect: metric with the state restored minus the corrupted metric; 0 where impossible."""
        out = self.scores[kind] - self.corrupted
        out[self.impossible] = 0.0
        return out

    def recovered(self, kind: str) -> np.ndarray:
        """The share of the total effect a restoration brings back (1: all of it). With nothing corrupted there
        is nothing to recover: every cell that can reach the answer is 1."""
        if abs(self.total_effect) < NOTHING_CORRUPTED:
            out = np.ones_like(self.scores[kind])
        else:
            out = self.effect(kind) / self.total_effect
        out[self.impossible] = 0.0
        return out

    def informative(self, kind: str) -> np.ndarray:
        """recovered(kind) without the one cell that restores the final state itself (the residual stream
        after the last layer at the last position: always all of it, so it says nothing); that cell is NaN."""
        out = self.recovered(kind)
        if kind == "residual":
            out[-1, -1] = np.nan
        return out

    def sentence(self) -> str:
        best = max(KINDS, key=lambda k: float(np.nanmax(self.informative(k))))
        grid = self.informative(best)
        layer, t = np.unravel_index(int(np.nanargmax(grid)), grid.shape)
        where = ("the last position" if t == len(self.tokens) - 1 else
                 "the name's last piece" if self.name_positions and t == self.name_positions[-1] else
                 "a piece of the name" if t in self.name_positions else f"position {t}")
        unit = "probability" if self.metric == "probability" else "logit difference"
        if abs(self.total_effect) < NOTHING_CORRUPTED:
            return "The corruption did not change the answer, so there is nothing to recover."
        return (f"Apart from the final state itself, restoring the {best} output of layer {layer} at {where} "
                f"({self.tokens[t]!r}) brings back the most: {grid[layer, t]:.0%} of the {unit} the corruption took "
                f"away ({self.clean:.3f} clean, {self.corrupted:.3f} corrupted)."
                + weak_effect_note(self.metric, self.clean, self.corrupted))

    @property
    def best_share(self) -> float:
        """The largest share of the total effect one restored state brings back (the final state excluded)."""
        return max(float(np.nanmax(self.informative(k))) for k in KINDS)

    def lesson(self) -> str | None:
        """None when this grid shows where the answer is held; else what it means that it cannot, in one or two
        sentences (the page says it in body text and offers the views that teach)."""
        unit = "probability" if self.metric == "probability" else "logit difference"
        total = self.total_effect
        if abs(total) < WEAK_EFFECT.get(self.metric, 0.0):
            return (f"The corruption moves the answer's {unit} by only {total:+.3f} ({self.clean:.3f} clean, "
                    f"{self.corrupted:.3f} corrupted): there is too little effect to share out, so this grid "
                    "cannot show where the answer is held. The model did not hold this answer firmly to begin with.")
        if self.best_share < LOCALISED_SHARE:
            return (f"No single restored state brings back more than {self.best_share:.0%} of the {total:.3f} the "
                    f"corruption took away ({self.clean:.3f} clean, {self.corrupted:.3f} corrupted), so the grid is "
                    f"almost white: restoring one state at a time does not bring this answer back, and the grid "
                    "cannot show where it is held. (The residual stream's cell after the last layer at the last "
                    "position is the model's final state itself: restoring it brings back all of it, so it is left "
                    "out.)")
        return None

    def to_json(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k not in ("scores", "impossible")}
        out["scores"] = {k: np.round(v, 6).tolist() for k, v in self.scores.items()}
        out["recovered"] = {k: np.round(self.recovered(k), 6).tolist() for k in self.scores}
        out["impossible"] = self.impossible.tolist()
        out["sentence"] = self.sentence()
        return out


def impossible_cells(n_layer: int, n_tokens: int) -> np.ndarray:
    """(L, T): the last layer at a position before the last writes nothing any later computation of the last
    position reads (causal attention reads earlier positions only in later layers), so restoring it cannot
    change the answer."""
    out = np.zeros((n_layer, n_tokens), dtype=bool)
    out[-1, :-1] = True
    return out


def untouched_cells(n_layer: int, n_tokens: int, first_corrupted: int) -> np.ndarray:
    """(L, T): positions before the first corrupted piece compute the same states in the clean and the corrupted
    run (a causal model reads nothing after them), so restoring them restores nothing: their effect is 0 and
    they are not run."""
    out = np.zeros((n_layer, n_tokens), dtype=bool)
    out[:, :max(0, first_corrupted)] = True
    return out


def default_window(n_layer: int) -> int:
    return 1 if n_layer <= SMALL_MODEL_LAYERS else min(ROME_WINDOW, n_layer)


def _layers_of(layer: int, window: int, n_layer: int) -> range:
    lo = max(0, layer - window // 2)
    return range(lo, min(n_layer, lo + window))


def swap_candidates(tokenizer, q: Question, names: Sequence[str]) -> list[tuple[str, list[int]]]:
    """Other names whose pieces in this question's frame are as many as the name's (symmetric replacement)."""
    out, seen = [], {q.name}
    for other in names:
        other = " ".join(other.split())
        if other in seen or not other:
            continue
        seen.add(other)
        prompt = q.question.replace(q.name, other, 1) + MASK_CHAR
        ids, raw = _prompt_pieces(tokenizer, prompt)
        span = name_span(prompt, other)
        if len(ids) != len(q.ids) + q.cut or span is None:
            continue
        theirs = [p - q.cut for p in name_pieces(tokenizer, prompt, ids, raw, span)]
        ids = ids[q.cut:]
        changed = [i for i, (a, b) in enumerate(zip(ids, q.ids)) if a != b]
        if changed and set(changed) <= set(q.name_positions) and theirs == q.name_positions:
            out.append((other, ids))
    return out


def shared_start(model, names: Sequence[int], corruption: str, n_tokens: int) -> int:
    """How many first positions every row of a trace's batch shares: before the first corrupted piece each row
    reads the same pieces and nothing is restored there. Read once (`last_logits`) by our own Transformer."""
    if not names or corruption == "none" or not isinstance(model, Transformer):
        return 0
    return min(names[0], n_tokens - 1)


def causal_trace(model, tokenizer, q: Question, rec: Trace | None = None, corruption: str = "noise",
                 metric: str | None = None, noise: float = NOISE, samples: int = SAMPLES, seed: int = SEED,
                 window: int | None = None, swap_names: Sequence[str] = (), noise_std: float | None = None
                 ) -> CausalTrace:
    """The three restoration grids for one question, all in one batched forward pass (see the module doc).
    `noise_std`: the standard deviation the noise is a multiple of (default: that of the name pieces' token
    embeddings; ROME measures it over a corpus of subjects)."""
    if corruption not in CORRUPTIONS:
        raise WhereFromError(f"Corruption must be one of {', '.join(CORRUPTIONS)}, not {corruption!r}.")
    metric = metric or ("probability" if corruption != "swap" else "logit difference")
    if metric not in METRICS:
        raise WhereFromError(f"The measure must be one of {', '.join(METRICS)}, not {metric!r}.")
    if not patchable(model):
        raise WhereFromError("Causal tracing patches a pre-norm decoder's residual stream through its hook points; "
                             "this model has none to patch.")
    if corruption != "none" and not q.name_positions:
        raise WhereFromError("No name was found in the question, so there is no subject to corrupt; ask "
                             "'Where was NAME born?'.")
    rec = rec if rec is not None and rec.activations is not None else record(model, q)
    acts = rec.activations
    device = model_device(model)
    L, T = acts.resid_post.shape[:2]
    window = default_window(L) if window is None else max(1, min(int(window), L))
    # the clean states from the same (fused-attention) path as the patched batch, so that restoring a state
    # changes nothing but that state (the Trace's explicit softmax differs in the last float32 bits)
    clean_pass = Recorder()
    with torch.inference_mode():
        model.hidden_states(torch.tensor([q.ids], dtype=torch.long, device=device), hooks=clean_pass)
    clean_states = {"residual": [x.to(device) for x in clean_pass.post],
                    "attention": [x.to(device) for x in clean_pass.attn],
                    "MLP": [x.to(device) for x in clean_pass.mlp]}
    impossible = impossible_cells(L, T)
    names = q.name_positions
    skipped = impossible | untouched_cells(L, T, names[0] if names and corruption != "none" else 0)
    cells = [(layer, t) for layer in range(L) for t in range(T) if not skipped[layer, t]]
    # ROME's sentences, as rows of the same batch: the residual stream of one layer restored at the name's last
    # piece, at all its pieces at once, at the last position (never a restoration that cannot matter)
    joint = {"name's last piece": names[-1:], "all name pieces": names, "last position": [T - 1]}
    joint_rows = [("residual", layer, label, positions) for layer in range(L)
                  for label, positions in joint.items() if positions and not impossible[layer, positions].all()]
    per_sample = 1 + len(KINDS) * len(cells) + len(joint_rows)

    generator = torch.Generator().manual_seed(int(seed))
    swapped: list[str] = []
    embed_std = 0.0
    if corruption == "swap":
        found = swap_candidates(tokenizer, q, swap_names)
        if not found:
            raise WhereFromError(f"No other name in the list reads as {len(names)} pieces in this question, so "
                                 "there is none to swap in; use noise instead.")
        order = torch.randperm(len(found), generator=generator).tolist()[:max(1, int(samples))]
        chosen = [found[i] for i in order]
        swapped = [name for name, _ in chosen]
        sample_ids = [ids for _, ids in chosen]
        noise_rows = None
    else:
        sample_ids = [q.ids] * (max(1, int(samples)) if corruption == "noise" else 1)
        noise_rows = None
        if corruption == "noise":
            with torch.no_grad():
                emb = model.tok_emb(torch.tensor([q.ids[p] for p in names], device=device))  # as the model scales
            embed_std = float(emb.float().std()) if noise_std is None else float(noise_std)
            draws = torch.randn(len(sample_ids), len(names), emb.size(-1), generator=generator)
            noise_rows = torch.zeros(len(sample_ids), T, emb.size(-1))
            noise_rows[:, names] = draws * noise * embed_std
    S = len(sample_ids)
    B = S * per_sample + 1  # every sample's rows, then one clean row (measured in the same batch as the rest)
    idx = torch.tensor(sample_ids + [q.ids], dtype=torch.long, device=device)
    idx = torch.cat([idx[:S].repeat_interleave(per_sample, dim=0), idx[S:]])  # (B, T)
    masks: dict[tuple[str, int], torch.Tensor] = {}
    first = [T] * B  # each row's first restored position (T: restores nothing)
    base = [row - row % per_sample if row < B - 1 else row for row in range(B)]  # the sample's unrestored row

    def mark(row: int, kind: str, layer: int, positions: Sequence[int]) -> None:
        first[row] = min(first[row], *positions)
        for lay in _layers_of(layer, window if kind != "residual" else 1, L):
            key = (kind, lay)
            if key not in masks:
                masks[key] = torch.zeros(B, T, dtype=torch.bool, device=device)
            masks[key][row, list(positions)] = True

    for s in range(S):
        row = s * per_sample + 1
        for kind in KINDS:
            for layer, t in cells:
                mark(row, kind, layer, [t])
                row += 1
        for kind, layer, _label, positions in joint_rows:
            mark(row, kind, layer, positions)
            row += 1
    noise_batch = None
    if noise_rows is not None:
        noise_batch = torch.cat([noise_rows.repeat_interleave(per_sample, dim=0), noise_rows[:1] * 0]).to(device)
    shared = shared_start(model, names, corruption, T)
    restore = _Restore({kind: [x[shared:] for x in states] for kind, states in clean_states.items()},
                       {key: mask[:, shared:] for key, mask in masks.items()},
                       None if noise_batch is None else noise_batch[:, shared:])
    with torch.inference_mode():
        logits = restored_logits(model, idx, restore, first, base, shared).double().cpu()
    clean_logits, logits = logits[-1], logits[:-1]
    a = q.answer_id
    corrupted_rows = logits[::per_sample]  # (S, V)
    if metric == "probability":
        values = torch.softmax(logits, -1)[:, a]
        clean = float(torch.softmax(clean_logits, -1)[a])
        against = [int(corrupted_rows[0].argmax())]
    else:
        against = []
        for row in corrupted_rows:
            top2 = row.topk(2).indices.tolist()
            against.append(top2[1] if top2[0] == a else top2[0])
        other = torch.tensor(against).repeat_interleave(per_sample)
        values = logits[:, a] - logits[torch.arange(B - 1), other]
        clean = float(np.mean([float(clean_logits[a] - clean_logits[b]) for b in against]))
    values = values.view(S, per_sample).mean(0).numpy()  # the mean over samples
    corrupted = float(values[0])
    scores = {}
    at = 1
    for kind in KINDS:
        grid = np.full((L, T), corrupted)
        for layer, t in cells:
            grid[layer, t] = values[at]
            at += 1
        scores[kind] = grid
    summary: dict[str, dict[str, float]] = {}
    total = clean - corrupted
    for kind, layer, label, _positions in joint_rows:
        share = (values[at] - corrupted) / total if abs(total) > NOTHING_CORRUPTED else 1.0
        summary.setdefault(kind, {})[f"layer {layer}, {label}"] = float(share)
        at += 1
    return CausalTrace(tokens=rec.tokens, name_positions=list(names), answer_piece=q.answer_piece,
                       corruption=corruption, metric=metric, noise=float(noise) if corruption == "noise" else 0.0,
                       noise_std=embed_std, seed=int(seed), samples=S, window=window, swapped_names=swapped,
                       clean=clean, corrupted=corrupted,
                       corrupted_answer=visible_token(tokenizer.decode([against[0]])),
                       scores=scores, impossible=impossible, summary=summary)


# --------------------------------------------------------------------------- input attribution


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


def integrated_gradients(model, ids: Sequence[int], score, steps: int = IG_STEPS
                         ) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(gradient x input (T,), integrated gradients (T,), score of the input, score of the baseline) of a scalar
    per batch row, `score(model, idx, hooks) -> (B,)` (a log-probability), over the token embeddings: zero
    baseline, positions kept, midpoint rule with `steps` points, one batched pass. Shared by the question view
    (the answer's first piece) and the error analysis (a classifier's class)."""
    if not patchable(model):
        raise WhereFromError("Input attribution patches a pre-norm decoder's embeddings through its hook points; "
                             "this model has none.")
    device = model_device(model)
    idx = torch.tensor([list(ids)], dtype=torch.long, device=device)  # (1, T)
    with torch.no_grad():
        x = model.tok_emb(idx).detach()  # (1, T, C)
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
