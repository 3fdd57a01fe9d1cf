"""Head roles: what each attention head does on a probe built to tell roles apart.

`python -m core.lens.heads MODEL [--step N] [--length n] [--samples S] [--stderr E] [--seed S] [--json]` prints,
for every layer x head, five scores in [0, 1]; the attention page draws the same numbers (a layers x heads map
per role).

The probe (`repeated_probe`) is S rows of `[BOS] r_1..r_n r_1..r_n`: n tokens drawn uniformly from the model's
vocabulary without its special tokens, then the same n again, the model's BOS token in front where it has one
(a BERT-family encoder's [CLS]). A role's score is the attention mass a head puts on the role's keys, averaged
over the query positions of the second copy and over the rows:

    previous-token   key i-1
    induction        every key j >= 1 whose previous token x[j-1] equals x[i] (Olsson et al. 2022's prefix
                     matching: in the second copy, the token after the earlier copy of the current one)
    duplicate-token  every key j < i with x[j] = x[i]
    first-token      key 0 (the attention sink)
    current-token    key i

Keys after the query (an encoder sees them) count for no role except through these rules, and induction counts
keys j <= i only: for j = i + 1 the previous token is the query itself, which says nothing about copying.
TransformerLens's head detector scores a pattern differently (a ratio over the whole sequence); this is the
definition the tests check, against a plain loop.

Every score comes from one batched `Trace` (core.lens.trace.trace_batch, attention only: the output head is not
run), in chunks of rows that keep the attention tensor small.

How many rows: S (`--samples`, default 100) is the most the probe draws. With a bound E (`--stderr`; the page and
this command use DEFAULT_STDERR = 0.01) the rows go through in doubling steps (5, 10, 20, 40, 80 rows, then all
S: a big model stops early, a small one pays few passes), and scoring stops at the first step where every
score's standard error (the spread of its per-row values over the root of the rows used) is below E even at the
one-sided 95% upper confidence bound of that spread (chi-square on rows - 1 degrees of freedom, so a spread read
from a few rows must be far below E to stop there); the table and the sentence say how many rows were used and the
largest standard error. The rows used are always the probe's first ones, so the scores are the issue's average
over those rows. E = 0 averages all S rows, always (what the tests and the bundled run's measurements use).

A records file (attention maps without a model, core.lens.records) cannot run the
probe: `roles_from_attention` gives it the roles that need no designed input (previous, first and current token,
averaged over every query after the first).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field

import numpy as np
import torch

# role -> what it means, one sentence (the attention page and the README say the same)
ROLES: dict[str, str] = {
    "previous-token": "attends to the token just before the current one",
    "induction": "attends to the token that followed an earlier copy of the current token, so it can predict "
                 "that the sequence repeats",
    "duplicate-token": "attends to earlier copies of the current token",
    "first-token": "attends to the first position (an attention sink: where a head rests when nothing else "
                   "fits)",
    "current-token": "attends to the current token itself",
}
NO_DESIGNED_INPUT = ("previous-token", "first-token", "current-token")  # readable on any attention

DEFAULT_LENGTH = 20
DEFAULT_SAMPLES = 100  # the most rows the probe draws
DEFAULT_STDERR = 0.01  # the page and the command stop adding rows once every score's standard error is below this
ROWS_PER_STEP = 5  # under a bound, the first check comes after this many rows; each later step doubles the rows
CONFIDENCE_Z = 1.645  # ... and the standard error checked is its one-sided 95% upper confidence bound
CHUNK_FLOATS = 16_000_000  # attention entries traced at once (64 MB of float32)


class HeadRolesError(ValueError):
    """A model or request the scores cannot be computed for; str() is one sentence for the user."""


@dataclass(frozen=True)
class RepeatedProbe:
    rows: np.ndarray  # (S, T) int64: [BOS] r_1..r_n r_1..r_n
    start: int  # where the first copy starts: 1 after a BOS, else 0
    length: int  # n
    bos: int | None
    note: str = ""  # one sentence when the probe is shorter than asked (a model with fewer positions)

    @property
    def queries(self) -> np.ndarray:
        """The query positions of the second copy."""
        first = self.start + self.length
        return np.arange(first, first + self.length)


def _special_ids(tokenizer) -> set[int]:
    ids = set(getattr(tokenizer, "special_ids", set()) or set())
    for name in ("pad_id", "mask_id", "unk_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int) and value >= 0:
            ids.add(value)
    inner = getattr(tokenizer, "inner", None)  # a transformers tokenizer: every special it names
    ids |= set(getattr(inner, "all_special_ids", []) or [])
    return ids


def bos_id(tokenizer) -> int | None:
    """The model's BOS token (a BERT-family encoder's [CLS]), or None: our own and nanoGPT's have none."""
    inner = getattr(tokenizer, "inner", None)
    for name in ("bos_token_id", "cls_token_id"):
        value = getattr(inner, name, None)
        if isinstance(value, int) and value >= 0:
            return value
    return None


def probe_vocabulary(tokenizer, model_vocab: int) -> np.ndarray:
    """The ids the probe draws from: every id both the tokenizer and the model have, specials left out."""
    size = min(int(getattr(tokenizer, "n_pieces", tokenizer.vocab_size)), int(model_vocab))
    special = _special_ids(tokenizer)
    return np.array([i for i in range(size) if i not in special], dtype=np.int64)


def repeated_probe(vocabulary: np.ndarray, length: int = DEFAULT_LENGTH, samples: int = DEFAULT_SAMPLES,
                   seed: int = 0, bos: int | None = None, max_length: int | None = None) -> RepeatedProbe:
    """S rows of `[BOS] r r` with r of `length` ids drawn uniformly (with replacement) from `vocabulary`. A model
    that reads fewer than 2 x length (+ BOS) positions gets the longest segment it can read, and a note."""
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise HeadRolesError(f"The repeated segment must be at least 1 token long, not {length!r}.")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise HeadRolesError(f"The probe needs at least 1 sample, not {samples!r}.")
    if len(vocabulary) < 2:
        raise HeadRolesError("The model's vocabulary has fewer than two ordinary tokens to draw a probe from.")
    start = 1 if bos is not None else 0
    note = ""
    if max_length is not None and start + 2 * length > max_length:
        fits = (max_length - start) // 2
        if fits < 2:
            raise HeadRolesError(f"This model reads at most {max_length} tokens: too few for a repeated segment.")
        note = (f"This model reads at most {max_length} tokens, so the repeated segment is {fits} tokens long "
                f"instead of {length}.")
        length = fits
    rng = np.random.default_rng(seed)
    segment = vocabulary[rng.integers(0, len(vocabulary), size=(samples, length))]  # (S, n)
    parts = ([np.full((samples, 1), bos, dtype=np.int64)] if bos is not None else []) + [segment, segment]
    return RepeatedProbe(rows=np.concatenate(parts, axis=1), start=start, length=length, bos=bos, note=note)


def role_masks(rows: np.ndarray, queries: np.ndarray) -> dict[str, np.ndarray]:
    """Per role, which keys count for each row and query: bool (S, Q, T)."""
    S, T = rows.shape
    i = queries.reshape(1, -1, 1)  # (1, Q, 1)
    j = np.arange(T).reshape(1, 1, T)  # (1, 1, T)
    current = rows[:, queries][:, :, None]  # (S, Q, 1): x[i]
    before = np.concatenate([np.full((S, 1), -1, dtype=rows.dtype), rows[:, :-1]], axis=1)  # x[j-1]; -1 at j=0
    shape = (S, len(queries), T)
    return {
        "previous-token": np.broadcast_to(j == i - 1, shape),
        "induction": (j >= 1) & (j <= i) & (before[:, None, :] == current),
        "duplicate-token": (j < i) & (rows[:, None, :] == current),
        "first-token": np.broadcast_to(j == 0, shape),
        "current-token": np.broadcast_to(j == i, shape),
    }


def row_sums(attention: torch.Tensor | np.ndarray, rows: np.ndarray, queries: np.ndarray) -> dict[str, np.ndarray]:
    """Each role's attention mass summed over the queries, per row, layer and head: (S, L, H) float64 (divide by
    the queries for each row's score). `attention`: (L, S, H, T, T), as a model's run_with_attention returns it."""
    weights = torch.as_tensor(attention).double()[:, :, :, torch.as_tensor(queries)]  # (L, S, H, Q, T)
    out = {}
    for role, mask in role_masks(rows, queries).items():
        out[role] = torch.einsum("lshqt,sqt->slh", weights, torch.from_numpy(np.array(mask, dtype=np.float64))).numpy()
    return out


def scores_from_attention(attention: torch.Tensor | np.ndarray, rows: np.ndarray,
                          queries: np.ndarray) -> dict[str, np.ndarray]:
    """Each role's summed attention mass over (rows, queries), per layer and head: (L, H) float64 sums (divide
    by rows x queries for the mean). `attention`: (L, S, H, T, T), as a model's run_with_attention returns it."""
    return {role: value.sum(axis=0) for role, value in row_sums(attention, rows, queries).items()}


@dataclass
class HeadRoles:
    scores: dict[str, np.ndarray]  # role -> (L, H) in [0, 1]
    length: int = 0  # the repeated segment's length the probe used
    samples: int = 0
    seed: int = 0
    notes: list[str] = field(default_factory=list)  # one sentence each: a shorter probe, roles left out
    stderr: float = 0.0  # the largest standard error of any score over the rows used (0: not measured)
    drawn: int = 0  # the rows the probe drew (S); `samples` were used, fewer when a bound stopped it early
    bound: float = 0.0  # the standard-error bound that stopped it (0: none, every drawn row used)

    @property
    def shape(self) -> tuple[int, int]:
        return next(iter(self.scores.values())).shape

    def strongest(self, role: str) -> tuple[int, int, float]:
        grid = self.scores[role]
        layer, head = np.unravel_index(int(np.argmax(grid)), grid.shape)
        return int(layer), int(head), float(grid[layer, head])

    def best_per_layer(self, role: str) -> np.ndarray:
        return self.scores[role].max(axis=1)

    def table(self) -> list[dict]:
        """One row per layer, head and role (the command's --json lines)."""
        L, H = self.shape
        return [{"layer": layer, "head": head, "role": role, "score": round(float(grid[layer, head]), 4)}
                for layer in range(L) for head in range(H) for role, grid in self.scores.items()]

    def role_of(self, layer: int, head: int, floor: float = 0.3) -> tuple[str, float] | None:
        """The head's highest-scoring role when it reaches `floor` (what the model view's hover says)."""
        best = max(self.scores, key=lambda r: self.scores[r][layer, head])
        value = float(self.scores[best][layer, head])
        return (best, value) if value >= floor else None

    def sentence(self) -> str:
        """One sentence naming each role's strongest head and its score."""
        parts = [f"{role} L{layer}H{head} ({score:.2f})"
                 for role in self.scores for layer, head, score in [self.strongest(role)]]
        return f"Strongest heads {self.where()}: " + ", ".join(parts) + "."

    def where(self) -> str:
        """What the scores were averaged over, in words: the rows used, why no more, how sure."""
        if not self.length:
            return "on the recorded attention"
        text = f"on {self.samples} repeated random segments of {self.length} tokens"
        if self.bound and self.samples < self.drawn:
            text += (f" (of up to {self.drawn}: scoring stopped once every score's standard error was below "
                     f"{self.bound:g} at 95% confidence)")
        if self.stderr:
            text += f", largest standard error {self.stderr:.3f}"
        return text


def _chunk_rows(model, T: int) -> int:
    config = getattr(model, "config", None)
    per_row = max(int(getattr(config, "n_layer", 1)) * int(getattr(config, "n_head", 1)) * T * T, 1)
    return max(1, CHUNK_FLOATS // per_row)


def probe_for(model, tokenizer, length: int = DEFAULT_LENGTH, samples: int = DEFAULT_SAMPLES,
              seed: int = 0) -> RepeatedProbe:
    """The repeated probe for this model: its vocabulary without specials, its BOS, its longest input."""
    config = getattr(model, "config", None)
    model_vocab = getattr(config, "vocab_size", None) or tokenizer.vocab_size
    return repeated_probe(probe_vocabulary(tokenizer, model_vocab), length, samples, seed, bos_id(tokenizer),
                          getattr(model, "max_length", None) or getattr(config, "block_size", None))


def _largest_stderr(sums: dict[str, np.ndarray], squares: dict[str, np.ndarray], n: int) -> float:
    """The largest standard error of any role's mean over `n` rows, from the per-row sums and sums of squares."""
    if n < 2:
        return float("inf")
    worst = 0.0
    for role, total in sums.items():
        mean = total / n
        variance = np.maximum(squares[role] - n * mean * mean, 0.0) / (n - 1)
        worst = max(worst, float(np.sqrt(variance.max() / n)))
    return worst


def spread_upper_factor(n: int, z: float = CONFIDENCE_Z) -> float:
    """How far a standard deviation read from `n` rows may understate the true one, at one-sided confidence z (1.645:
    95%): sqrt(k / chi2_lower(k)) with k = n - 1 (Wilson-Hilferty's approximation of the chi-square quantile, within
    3% of it from k = 4)."""
    k = n - 1
    if k < 1:
        return float("inf")
    quantile = k * (1 - 2 / (9 * k) - z * np.sqrt(2 / (9 * k))) ** 3
    return float(np.sqrt(k / quantile)) if quantile > 0 else float("inf")


def score_probe(model, probe: RepeatedProbe, seed: int = 0, stderr: float = 0.0) -> HeadRoles:
    """The five role scores of every head of `model` on `probe`, from batched traces of a few rows at a time:
    every row, or with `stderr` > 0 the first ROWS_PER_STEP rows, then twice as many, and so on, until every score's
    standard error is below it at its 95% upper confidence bound (`spread_upper_factor`); the rows used are always
    the probe's first ones."""
    from core.lens.trace import TraceError, trace_batch

    samples, Q = len(probe.rows), len(probe.queries)
    chunk = _chunk_rows(model, probe.rows.shape[1])
    checks = [min(ROWS_PER_STEP << k, samples) for k in range(samples.bit_length() + 1)] if stderr > 0 else [samples]
    ends = sorted(set(range(chunk, samples, chunk)) | set(checks))  # no pass over `chunk` rows, a stop at each check
    sums: dict[str, np.ndarray] = {}
    squares: dict[str, np.ndarray] = {}
    used = 0
    for end in ends:
        rows = probe.rows[used:end]
        try:
            record = trace_batch(model, rows.tolist(), logits=False)
        except TraceError as exc:
            raise HeadRolesError(str(exc)) from None
        for role, value in row_sums(record.rows_attention, rows, probe.queries).items():
            per_row = value / Q  # (S, L, H): each row's score
            sums[role] = sums.get(role, 0) + per_row.sum(axis=0)
            squares[role] = squares.get(role, 0) + (per_row ** 2).sum(axis=0)
        used += len(rows)
        if stderr > 0 and used in checks and _largest_stderr(sums, squares, used) * spread_upper_factor(used) < stderr:
            break
    error = _largest_stderr(sums, squares, used)
    return HeadRoles({role: (value / used).astype(np.float32) for role, value in sums.items()}, probe.length,
                     used, seed, [probe.note] if probe.note else [], stderr=error if np.isfinite(error) else 0.0,
                     drawn=samples, bound=stderr)


def head_roles(model, tokenizer, length: int = DEFAULT_LENGTH, samples: int = DEFAULT_SAMPLES,
               seed: int = 0, stderr: float = 0.0) -> HeadRoles:
    """The five role scores of every head of `model` on its repeated probe (`probe_for`, `score_probe`): the
    mean over `samples` rows, or over fewer once every score's standard error is below `stderr` (> 0)."""
    return score_probe(model, probe_for(model, tokenizer, length, samples, seed), seed, stderr)


def roles_from_attention(attention: np.ndarray) -> HeadRoles:
    """The roles that need no designed input, from recorded attention (L, H, T, T) on any text: averaged over
    every query after the first. Induction and duplicate-token are left out, with a note."""
    attention = np.asarray(attention, dtype=np.float64)
    if attention.ndim != 4 or attention.shape[-1] != attention.shape[-2] or attention.shape[-1] < 2:
        raise HeadRolesError("Head roles need attention maps of at least two tokens, shaped (layers, heads, T, T).")
    T = attention.shape[-1]
    queries = np.arange(1, T)
    rows = np.arange(T).reshape(1, T)  # every token distinct: only the positional roles are read
    sums = scores_from_attention(attention[:, None], rows, queries)
    scores = {role: (sums[role] / len(queries)).astype(np.float32) for role in NO_DESIGNED_INPUT}
    note = ("Induction and duplicate-token scores need the repeated-token probe run through the model; "
            "attention records without a model cannot run it.")
    return HeadRoles(scores, notes=[note])


def load_at_step(model_path: str, step: int | None):
    """The checkpoint (or Hugging Face folder) at `path`, at a kept training step when `step` is given."""
    from core.io import snapshots
    from core.io.checkpoint import load

    loaded = load(model_path)
    if step is None:
        return loaded
    found = snapshots.snapshots_of(loaded)
    if not found or not found.snapshots:
        raise HeadRolesError(f"{loaded.path.name} keeps no training-step snapshots, so --step cannot be read.")
    kept = snapshots.slider_steps(loaded, found)
    if step not in kept:
        shown = ", ".join(str(s) for s in kept[:12]) + (" ..." if len(kept) > 12 else "")
        raise HeadRolesError(f"Step {step} is not a kept step of {loaded.path.name}; kept steps: {shown}.")
    return snapshots.at_step(loaded, found, step)


def format_table(roles: HeadRoles) -> str:
    names = list(roles.scores)
    lines = ["layer head " + " ".join(f"{n:>15}" for n in names)]
    L, H = roles.shape
    for layer in range(L):
        for head in range(H):
            lines.append(f"{layer:>5} {head:>4} " + " ".join(f"{roles.scores[n][layer, head]:>15.3f}" for n in names))
    return "\n".join([f"Scores {roles.where()}.", *lines])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m core.lens.heads", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a .safetensors checkpoint or a Hugging Face model folder")
    parser.add_argument("--step", type=int, default=None, help="a kept training step (checkpoints with snapshots)")
    parser.add_argument("--length", type=int, default=DEFAULT_LENGTH, help="the repeated segment's length n")
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES,
                        help=f"probe rows drawn: the most averaged over (default {DEFAULT_SAMPLES})")
    parser.add_argument("--stderr", type=float, default=DEFAULT_STDERR,
                        help=f"stop adding rows ({ROWS_PER_STEP}, then doubling) once every score's standard error "
                             f"is below this at its 95%% upper confidence bound (default {DEFAULT_STDERR}); 0: average "
                             "all --samples rows")
    parser.add_argument("--seed", type=int, default=0, help="the probe's random seed")
    parser.add_argument("--json", action="store_true", help="one JSON object per layer, head and role")
    return parser


def main(argv: list[str] | None = None) -> int:
    from core.io.loaded import CheckpointError

    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.length < 1 or args.samples < 1:
            raise HeadRolesError("--length and --samples must be at least 1.")
        if args.samples > 100_000 or args.length > 100_000:
            raise HeadRolesError("--length and --samples are capped at 100,000.")
        loaded = load_at_step(args.model, args.step)
        if not 0 <= args.stderr < 1:
            raise HeadRolesError("--stderr must be at least 0 and below 1.")
        roles = head_roles(loaded.model, loaded.tokenizer, args.length, args.samples, args.seed, args.stderr)
    except (HeadRolesError, CheckpointError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for note in roles.notes:
        print(note, file=sys.stderr)
    if args.json:
        for row in roles.table():
            print(json.dumps(row))
    else:
        print(format_table(roles))
        print(roles.sentence())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
