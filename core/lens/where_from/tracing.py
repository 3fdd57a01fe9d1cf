"""Causal tracing: ROME (Meng et al. 2022), with Zhang & Nanda 2023's best practice: corrupt the subject (the
name's pieces) by Gaussian noise of `noise` x the standard deviation of those pieces' token embeddings (a fixed
seed, the mean over `samples` draws) or by symmetric token replacement with another person's name of the same
number of pieces; restore one clean state at one (layer, position) for the residual stream, the attention output
and the MLP output; measure the answer's probability or the logit difference against the corrupted run's answer.
Every restored run of one question is a row of one batch, run in passes of at most CHUNK_TOKENS positions with
`progress` between them (a page's bar and Stop). The subject is a birthplace question's name (`read_question`) or
any prompt's marked subject (`read_prompt`, core.lens.where_from.prompts). With 4 layers or fewer the window is
one layer (ROME's window of 10 would restore the whole model at once). The last layer at a position before the
last cannot reach the answer: those cells are marked and are exactly 0."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from core.lens.attention import piece_label
from core.lens.trace import Progress, Trace, model_device
from core.lens.where_from.question import (
    Question,
    WhereFromError,
    name_pieces,
    name_span,
    patchable,
    prompt_pieces,
    record,
)
from core.model.attention import KVCache
from core.model.hooks import Hooks, Recorder
from core.model.transformer import Transformer
from core.text import quoted_token

KINDS = ("residual", "attention", "MLP")
CORRUPTIONS = ("noise", "swap", "none")
METRICS = ("probability", "logit difference")
POSITION_CLASSES = ("before the name", "name's first piece", "name's middle pieces", "name's last piece",
                    "after the name", "last position")
NOISE = 3.0  # ROME: 3 standard deviations of the subject's embeddings
SAMPLES = 10  # ROME's number of noise draws
SEED = 0
SMALL_MODEL_LAYERS = 4  # up to this many layers, restore one layer at a time
ROME_WINDOW = 10
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


# positions one patched pass reads at most: a Hugging Face model's trace (every row reads the whole prompt) runs in
# passes of this many rows x positions, so that its memory stays bounded and its progress can be shown between them
# (1,024: on a 135M LLaMA-shaped folder on one CPU thread a pass of 64 rows x 16 positions takes ~10 s, so the bar
# moves every ~10 s; bench.hf_errors_trace)
CHUNK_TOKENS = 1024


def chunked_logits(model, idx: torch.Tensor, restore: _Restore, shared: int = 0, keep=None,
                   progress: Progress | None = None) -> torch.Tensor:
    """`last_logits` of the batch in passes of at most CHUNK_TOKENS positions, each pass's (rows, V) logits
    reduced by `keep` (default: kept whole) before the next, `progress(rows done, rows)` after each."""
    B, T = idx.shape
    rows = max(1, CHUNK_TOKENS // max(1, T - shared))
    parts = []
    if progress is not None:
        progress(0, B)  # before the first pass: a page draws its bar now, not a pass later
    for lo in range(0, B, rows):
        sel = torch.arange(lo, min(B, lo + rows))
        logits = last_logits(model, idx[sel], restore.part(sel), shared)
        parts.append(logits if keep is None else keep(logits))
        if progress is not None:
            progress(int(sel[-1]) + 1, B)
    return torch.cat(parts)


def restored_logits(model, idx: torch.Tensor, restore: _Restore, first: Sequence[int], base: Sequence[int],
                    shared: int = 0, keep=None, progress: Progress | None = None) -> torch.Tensor:
    """(B, V) last-position logits of a trace's batch (each row reduced by `keep` when given), each row computed
    only from its first restored position on.

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
        return chunked_logits(model, idx, restore, shared, keep, progress)
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
    starts = sorted({int(f) for f in first_t.tolist()} - {T})
    if progress is not None:
        progress(0, len(starts))
    for done, g in enumerate(starts, 1):
        group = torch.nonzero(first_t == g).flatten()
        start = max(g, shared)
        kept = [c.rows(base_t[group], start) for c in caches]
        part = _Restore({kind: [x[start - shared:] for x in states] for kind, states in restore.clean.items()},
                        {key: mask[group, start - shared:] for key, mask in restore.masks.items()},
                        None if restore.noise is None else restore.noise[group, start - shared:])
        h, _ = model.hidden_states(idx[group, start:], start=start, caches=kept, hooks=part)
        out[group] = model.head.unembed(h[:, -1])
        if progress is not None:
            progress(done, len(starts))
    return out if keep is None else keep(out)


class _Restore(Hooks):
    """Patches a batch: each row restores clean states at the (kind, layer, position) cells it lists, and rows
    may carry their own token embeddings (noise on the name's pieces)."""

    def __init__(self, clean: dict[str, list[torch.Tensor]], masks: dict[tuple[str, int], torch.Tensor],
                 embed_noise: torch.Tensor | None) -> None:
        self.clean, self.masks, self.noise = clean, masks, embed_noise

    def part(self, rows: torch.Tensor) -> _Restore:
        """The same patches for these rows of the batch only."""
        return _Restore(self.clean, {key: mask[rows] for key, mask in self.masks.items()},
                        None if self.noise is None else self.noise[rows])

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
    subject: str = "name"  # what the corrupted pieces are called in the sentence: a question's name, a prompt's subject

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
                 f"the {self.subject}'s last piece" if self.name_positions and t == self.name_positions[-1] else
                 f"a piece of the {self.subject}" if t in self.name_positions else f"position {t}")
        unit = "probability" if self.metric == "probability" else "logit difference"
        if abs(self.total_effect) < NOTHING_CORRUPTED:
            return "The corruption did not change the answer, so there is nothing to recover."
        return (f"Apart from the final state itself, restoring the {best} output of layer {layer} at {where} "
                f"({quoted_token(self.tokens[t])}) brings back the most: {grid[layer, t]:.0%} of the {unit} the "
                f"corruption took away ({self.clean:.3f} clean, {self.corrupted:.3f} corrupted)."
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
        prompt = q.text.replace(q.name, other, 1)
        ids, raw = prompt_pieces(tokenizer, prompt)
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
                 window: int | None = None, swap_names: Sequence[str] = (), noise_std: float | None = None,
                 progress: Progress | None = None) -> CausalTrace:
    """The three restoration grids for one question, all in one batched forward pass (see the module doc).
    `noise_std`: the standard deviation the noise is a multiple of (default: that of the name pieces' token
    embeddings; ROME measures it over a corpus of subjects). `progress(done, total)` is called between the batch's
    passes (a page's bar; a Stop there interrupts the trace)."""
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
    a = q.answer_id
    unrestored = torch.tensor([s * per_sample for s in range(S)] + [B - 1])  # each sample's corrupted row, clean
    with torch.inference_mode():
        plain = last_logits(model, idx[unrestored], restore.part(unrestored), shared).double().cpu()
    corrupted_rows, clean_logits = plain[:-1], plain[-1]  # (S, V), (V,)
    if metric == "probability":
        against = [int(corrupted_rows[0].argmax())]
    else:
        against = []
        for row in corrupted_rows:
            top2 = row.topk(2).indices.tolist()
            against.append(top2[1] if top2[0] == a else top2[0])
    columns = torch.tensor([a, *against], device=device)

    def keep(logits: torch.Tensor) -> torch.Tensor:  # (rows, V) -> (rows, 1 + 1 + S): log Z, the answer, against
        logits = logits.double()
        return torch.cat([torch.logsumexp(logits, -1, keepdim=True), logits[:, columns]], -1).cpu()

    with torch.inference_mode():
        kept = restored_logits(model, idx, restore, first, base, shared, keep, progress)[:-1]  # (B - 1, 2 + S)
    if metric == "probability":
        values = torch.exp(kept[:, 1] - kept[:, 0])
        clean = float(torch.softmax(clean_logits, -1)[a])
    else:
        sample = torch.arange(B - 1) // per_sample
        values = kept[:, 1] - kept[torch.arange(B - 1), 2 + sample]
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
                       corrupted_answer=piece_label(tokenizer, against[0]),
                       scores=scores, impossible=impossible, summary=summary,
                       subject="subject" if q.marked else "name")

