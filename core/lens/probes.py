"""Probes: what a model's hidden states hold, layer by layer, against the controls that make a probe mean anything.

A label source gives examples (a text, a label, where to read: the text's last piece, the last piece of a span, or
each piece of each word for token tags) -> one batched `core.lens.trace.trace_batch(..., streams=True)` per length
gives the residual stream at that position after the embedding and after every block (no second forward anywhere)
-> a linear probe per layer (plain multinomial logistic regression, written here in torch: standardised states, an
L2 penalty, L-BFGS) scored by k-fold cross-validation (5 folds, stratified where every class has as many members,
one fixed seed), with a 95% interval over the folds (Student's t).

A probe means little without controls (Hewitt & Liang 2019, "Designing and Interpreting Probes with Control
Tasks"): beside every layer's accuracy stand
- the control: the same probe on shuffled labels (for token tags their control task instead: every word type gets
  one random label drawn from the label distribution, so a probe can only score by memorising word types), and the
  selectivity, accuracy minus control;
- the majority baseline (always the most common label of the training folds);
- the embedding-only baseline (layer 0, before any block): what the pieces alone give away. At the last piece of
  a name the surname tells the country: a probe there is high from the embedding on, and says nothing about what
  the model knows. `probe_sentence` warns when that is so;
- the logit lens (nostalgebraist 2020, core.lens.where_from.logitlens.read_through) where the label is a next piece:
  per layer, how often the label's first piece is the top of the labels' first pieces read through the model's
  own final LayerNorm and output head.

    python -m core.lens.probes CHECKPOINT --world data/knowledge --label country --at prompt [--json]
    python -m core.lens.probes CHECKPOINT --file FILE [--tags] [--json]
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

FOLDS = 5
SEED = 0
ITER = 100  # L-BFGS iterations per fit (at 30 the world's figures are still 0.02-0.03 lower)
L2 = 1e-3  # the penalty on the weights per example (mean loss + L2 * |W|^2): about scikit-learn's default C=1
SPLIT_TEST = 0.2  # the single split reported beside the folds (the 80/20 figures)
BATCH = 256  # rows per forward pass
MAX_EXAMPLES = 20_000  # reads (positions) probed at once
WORLD_PROMPT = "{name} was born in"
WORLD_LABELS = {"country": "country", "place": "birthplace"}  # label -> people.tsv column
WORLD_POSITIONS = {"prompt": "the last piece of \"NAME was born in\"",
                   "span": "the last piece of the name inside \"NAME was born in\"",
                   "name": "the last piece of the name alone"}
FILE_POSITIONS = {"last": "the last piece of the text", "span": "the last piece of the span marked [[...]]"}
TAG_POSITIONS = {"word": "the last piece of each word", "piece": "every piece of each word"}
SPAN = re.compile(r"\[\[(.+?)\]\]")
TAG_FORMAT = ("one 'word<TAB>tag' per line, a blank line between sentences (a sentence is its words joined by "
              "single spaces)")

Progress = Callable[[int, int], None]


class ProbeError(ValueError):
    """Input the probes cannot use; str() is one sentence for the user."""


# --------------------------------------------------------------------------- examples


@dataclass(frozen=True)
class Example:
    text: str  # what the model reads
    label: str
    span: tuple[int, int] | None = None  # characters read at their last piece; None: the text's last piece
    word: str = ""  # the word type (token tags: what the control task keys on)
    every: bool = False  # every piece of the span is read (token tags), not its last


@dataclass(frozen=True)
class LabelSource:
    name: str  # "knowledge/people.tsv (country)", the file's name
    label: str  # what is decoded: "country", "birthplace", "tag", "label"
    position: str  # where it is read, in words
    examples: tuple[Example, ...]
    next_piece: bool = False  # the label is what the model would write next at the read position


def world_source(folder: str | Path, label: str = "country", at: str = "prompt", limit: int | None = None
                 ) -> LabelSource:
    """The birthplace world's people (people.tsv): their country or birthplace, read in "NAME was born in" at its
    last piece (`at="prompt"`), at the name's last piece inside it ("span"), or in the name alone ("name")."""
    if label not in WORLD_LABELS:
        raise ProbeError(f"The world's labels are {', '.join(WORLD_LABELS)}, not {label!r}.")
    if at not in WORLD_POSITIONS:
        raise ProbeError(f"Read the world at {', '.join(WORLD_POSITIONS)}, not {at!r}.")
    path = Path(folder) / "people.tsv"
    if not path.is_file():
        raise ProbeError(f"{path} does not exist: the birthplace world is a folder with people.tsv "
                         "(python -m core.data.world writes one).")
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t") if lines else []
    column = WORLD_LABELS[label]
    if "name" not in header or column not in header:
        raise ProbeError(f"{path.name} has no 'name' and '{column}' columns in its header.")
    examples = []
    for line in lines[1:limit + 1 if limit else None]:
        row = dict(zip(header, line.split("\t")))
        name, value = row.get("name", "").strip(), row.get(column, "").strip()
        if not name or not value:
            continue
        if at == "name":
            examples.append(Example(name, value))
        else:
            text = WORLD_PROMPT.format(name=name)
            examples.append(Example(text, value, span=(0, len(name)) if at == "span" else None))
    folder_name = Path(folder).name or str(folder)
    return LabelSource(f"{folder_name}/people.tsv ({label})", label, WORLD_POSITIONS[at], tuple(examples),
                       next_piece=label == "place" and at == "prompt")


def file_source(text: str, name: str, at: str = "last") -> LabelSource:
    """A `LABEL<TAB>TEXT` file (or a CSV with text and label columns), read at the text's last piece, or (`at="span"`)
    at the last piece of the part marked [[...]] (the brackets are not read)."""
    from core.data.datasets import DataError, parse_tsv_pairs
    from core.lens.errors.inputs import EvalText, csv_pairs

    if at not in FILE_POSITIONS:
        raise ProbeError(f"Read a file at {', '.join(FILE_POSITIONS)}, not {at!r}.")
    try:
        pairs = csv_pairs(EvalText(name, text, "")) or parse_tsv_pairs(text, name)
    except DataError as exc:
        raise ProbeError(str(exc).replace("'TEXT<TAB>ANSWER'", "'LABEL<TAB>TEXT'")) from None
    examples = []
    for number, (label, body) in enumerate(pairs, start=1):
        label = label.strip()
        if not label:
            raise ProbeError(f"Line {number} of {name} has no label before its tab; every line is 'LABEL<TAB>TEXT'.")
        if not body.strip():
            raise ProbeError(f"Line {number} of {name} has a label but no text after its tab.")
        span = None
        if at == "span":
            found = SPAN.search(body)
            if found is None:
                raise ProbeError(f"Line {number} of {name} marks no span: put the part to read in [[...]].")
            body = body[:found.start()] + found.group(1) + body[found.end():]
            span = (found.start(), found.start() + len(found.group(1)))
            body = SPAN.sub(lambda m: m.group(1), body)
        examples.append(Example(body, label, span=span))
    return LabelSource(name, "label", FILE_POSITIONS[at], tuple(examples))


def tag_source(text: str, name: str, at: str = "word") -> LabelSource:
    """A token-level tag file (`TAG_FORMAT`): each word's tag, read at the word's last piece or at every piece."""
    if at not in TAG_POSITIONS:
        raise ProbeError(f"Read tags at {', '.join(TAG_POSITIONS)}, not {at!r}.")
    sentences: list[list[tuple[str, str]]] = [[]]
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if not line.strip():
            if sentences[-1]:
                sentences.append([])
            continue
        word, tab, tag = line.partition("\t")
        if not tab or not word.strip() or not tag.strip():
            raise ProbeError(f"Line {number} of {name} is not 'word<TAB>tag' (a tag file has {TAG_FORMAT}).")
        sentences[-1].append((word.strip(), tag.strip()))
    examples = []
    for words in (s for s in sentences if s):
        body = " ".join(w for w, _ in words)
        at_char = 0
        for word, tag in words:
            examples.append(Example(body, tag, span=(at_char, at_char + len(word)), word=word, every=at == "piece"))
            at_char += len(word) + 1
    if not examples:
        raise ProbeError(f"{name} has no tagged words ({TAG_FORMAT}).")
    return LabelSource(name, "tag", TAG_POSITIONS[at], tuple(examples))


# --------------------------------------------------------------------------- the states


@dataclass
class States:
    """The residual stream at every read position: after the embedding (layer 0) and after every block."""

    x: np.ndarray  # (N, L + 1, C) float32
    labels: list[str]  # (N,)
    texts: list[str]  # (N,)
    words: list[str]  # (N,) the word type (token tags) or ""
    pieces: list[str]  # (N,) the piece read
    layers: list[str]  # "embedding", "after block 0", ...
    unknown: list[str] = field(default_factory=list)  # input pieces the vocabulary lacks
    dropped: int = 0  # reads past what the model can read
    lens: np.ndarray | None = None  # (N, L + 1) bool: the logit lens's top label piece is the label's; None: n/a
    lens_note: str = ""  # why there is no logit lens, or what it read


def piece_ends(tokenized, text: str) -> list[int]:
    """The character where each piece ends in `text` (offsets where the tokenizer gives them, else the pieces
    spelled in order, else each piece found from where the last ended)."""
    if tokenized.offsets:
        return [int(end) for _, end in tokenized.offsets]
    if "".join(tokenized.tokens) == text:
        return list(np.cumsum([len(t) for t in tokenized.tokens]).tolist())
    ends, at, folded = [], 0, text.lower()
    for token in tokenized.tokens:
        found = folded.find(token.lower(), at)
        at = found + len(token) if found >= 0 else at
        ends.append(at)
    return ends


def read_positions(example: Example, ends: list[int], n_pieces: int) -> list[int]:
    if example.span is None:
        return [n_pieces - 1]
    start, end = example.span
    covering = [i for i, e in enumerate(ends) if e > start and (i == 0 or ends[i - 1] < end)]
    if not covering:
        return []
    return covering if example.every else [covering[-1]]


def label_pieces(tokenizer, text: str, labels: Sequence[str]) -> dict[str, int]:
    """Each label's next piece after `text` as the model would write it there: the piece after the text's own
    pieces in the text, a space and the label tokenised together (where the text's pieces are a prefix of that)."""
    before = tokenizer.encode(text)
    out = {}
    for label in labels:
        whole = tokenizer.encode(f"{text} {label}")
        if whole[:len(before)] == before and len(whole) > len(before):
            out[label] = whole[len(before)]
    return out


def collect_states(model, tokenizer, source: LabelSource, progress: Progress | None = None) -> States:
    """The residual stream at each example's read position(s), every layer: one `trace_batch` per length."""
    from core.lens.trace import TraceError, trace_batch

    if not source.examples:
        raise ProbeError(f"{source.name} has no examples.")
    limit = getattr(model, "max_length", None) or model.config.block_size
    texts = list(dict.fromkeys(e.text for e in source.examples))
    read = {t: tokenizer.tokenize(t) for t in texts}
    unknown = list(dict.fromkeys(p for t in texts for p in read[t].unknown))
    reads: list[tuple[Example, str, int]] = []  # (example, text, position)
    dropped = 0
    for example in source.examples:
        tokenized = read[example.text]
        n = len(tokenized.ids)
        positions = read_positions(example, piece_ends(tokenized, example.text), n) if n else []
        kept = [p for p in positions if p < limit]
        dropped += len(positions) - len(kept) + (not positions)
        reads += [(example, example.text, p) for p in kept]
    if not reads:
        raise ProbeError(f"None of the {len(source.examples)} examples can be read: each is empty, past the "
                         f"{limit} pieces this model reads, or its span covers no piece.")
    if len(reads) > MAX_EXAMPLES:
        raise ProbeError(f"{source.name} gives {len(reads):,} positions to read; up to {MAX_EXAMPLES:,} are probed "
                         "at once.")
    lengths: dict[int, list[str]] = {}
    for text in texts:
        ids = read[text].ids[:limit]
        if ids:
            lengths.setdefault(len(ids), []).append(text)
    row_of: dict[str, tuple[int, int]] = {}  # text -> (batch, row)
    batches: list[torch.Tensor] = []
    total, done = sum(len(v) for v in lengths.values()), 0
    for length in sorted(lengths):
        group = lengths[length]
        for start in range(0, len(group), BATCH):
            chunk = group[start:start + BATCH]
            try:
                record = trace_batch(model, [read[t].ids[:limit] for t in chunk], logits=False, streams=True)
            except TraceError as exc:
                raise ProbeError(str(exc)) from None
            if record.rows_stream is None:
                raise ProbeError("This model does not report its residual stream, so it cannot be probed.")
            for row, text in enumerate(chunk):
                row_of[text] = (len(batches), row)
            batches.append(record.rows_stream)  # (L + 1, B, T, C)
            done += len(chunk)
            if progress is not None:
                progress(done, total)
    x = np.stack([batches[row_of[t][0]][:, row_of[t][1], p].numpy() for _, t, p in reads])  # (N, L + 1, C)
    n_layer = x.shape[1] - 1
    states = States(x=x.astype(np.float32), labels=[e.label for e, _, _ in reads], texts=[t for _, t, _ in reads],
                    words=[e.word for e, _, _ in reads],
                    pieces=[read[t].tokens[p] for _, t, p in reads],
                    layers=["embedding"] + [f"after block {i}" for i in range(n_layer)], unknown=unknown,
                    dropped=dropped)
    if source.next_piece:
        lens_accuracy(model, tokenizer, states)
    else:
        states.lens_note = "The logit lens is shown where the label is the next piece (the birthplace after " \
                           "\"NAME was born in\")."
    return states


def lens_accuracy(model, tokenizer, states: States) -> None:
    """Per read and layer: whether the label's first piece tops the labels' first pieces through the model's own
    final LayerNorm and output head (core.lens.where_from.logitlens.read_through). Sets `states.lens`."""
    from core.lens.where_from.logitlens import read_through
    from core.lens.where_from.question import WhereFromError, readout_of

    try:
        readout_of(model)
    except WhereFromError:
        states.lens_note = ("The logit lens is not available: this model has no final LayerNorm and output head to "
                            "read its stream through (a classifier); the probes still run.")
        return
    first = label_pieces(tokenizer, states.texts[0], sorted(set(states.labels)))  # one prompt template for all
    candidates = sorted(set(first.values()))
    if len(candidates) < 2:
        piece = tokenizer.decode(candidates) if candidates else ""
        states.lens_note = (f"The logit lens is not shown: after the text the next piece is the same for every label "
                            f"({piece!r}: a space is its own piece in this vocabulary), so it cannot tell labels apart "
                            "there.")
        return
    logits = read_through(model, states.x, candidates)  # (N, L + 1, K)
    top = np.asarray(candidates)[logits.argmax(-1).numpy()]  # (N, L + 1)
    truth = np.asarray([first.get(label, -1) for label in states.labels])
    states.lens = top == truth[:, None]
    shared = len(first) - len(candidates)
    states.lens_note = ("Logit lens: the label's first piece is the top of the labels' first pieces"
                        + (f" ({shared} labels share a first piece with another)." if shared else "."))


# --------------------------------------------------------------------------- the probe


def standardise(train: torch.Tensor, test: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each feature centred and scaled by the training rows' mean and standard deviation (per problem)."""
    mean = train.mean(dim=-2, keepdim=True)
    std = train.std(dim=-2, keepdim=True).clamp_min(1e-6)
    return (train - mean) / std, (test - mean) / std


def fit_predict(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, n_classes: int, l2: float = L2,
                iterations: int = ITER, standardised: bool = True) -> np.ndarray:
    """Multinomial logistic regression, one independent problem per leading index: x_train (P, n, C), y_train
    (P, n) -> predicted classes of x_test (P, m). Standardised features, mean cross-entropy + l2 * |W|^2 (bias
    free), minimised by L-BFGS (the problems are independent, so one optimiser over their summed losses)."""
    with torch.no_grad():
        xt, xs = torch.as_tensor(x_train, dtype=torch.float64), torch.as_tensor(x_test, dtype=torch.float64)
        if standardised:
            xt, xs = standardise(xt, xs)
    y = torch.as_tensor(np.ascontiguousarray(y_train), dtype=torch.long)
    problems, _, width = xt.shape
    weight = torch.zeros(problems, width, n_classes, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(problems, 1, n_classes, dtype=torch.float64, requires_grad=True)
    optimiser = torch.optim.LBFGS([weight, bias], lr=1.0, max_iter=iterations, tolerance_grad=1e-6,
                                  history_size=20, line_search_fn="strong_wolfe")

    def closure():
        optimiser.zero_grad()
        logits = xt @ weight + bias  # (P, n, K)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, n_classes), y.reshape(-1)) * problems
        loss = loss + l2 * weight.pow(2).sum()
        loss.backward()
        return loss

    optimiser.step(closure)
    with torch.no_grad():
        return (xs @ weight + bias).argmax(-1).numpy()


def fold_ids(y: np.ndarray, folds: int, seed: int) -> tuple[np.ndarray, bool]:
    """(N,) fold of each example and whether the folds are stratified (every class has at least `folds` members):
    each class's members shuffled and dealt round the folds; else all examples shuffled and dealt."""
    rng = np.random.default_rng(seed)
    out = np.empty(len(y), dtype=np.int64)
    counts = np.bincount(y)
    stratified = bool(counts[counts > 0].min() >= folds)
    if stratified:
        offset = 0
        for cls in np.flatnonzero(counts):
            members = rng.permutation(np.flatnonzero(y == cls))
            out[members] = (np.arange(len(members)) + offset) % folds
            offset += len(members)
    else:
        out[rng.permutation(len(y))] = np.arange(len(y)) % folds
    return out, stratified


def split_ids(y: np.ndarray, test: float, seed: int) -> np.ndarray:
    """(N,) True for the test part of one split (stratified: each class's share, at least one where it has two)."""
    rng = np.random.default_rng(seed + 1)
    out = np.zeros(len(y), dtype=bool)
    for cls in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == cls))
        n = int(round(len(members) * test))
        out[members[:n if len(members) > 1 else 0]] = True
    return out


def control_labels(y: np.ndarray, words: Sequence[str], seed: int) -> np.ndarray:
    """The control: without word types the labels shuffled; with them (token tags) Hewitt & Liang's control task,
    every word type one label drawn at random from the label distribution."""
    rng = np.random.default_rng(seed + 2)
    if not any(words):
        return rng.permutation(y)
    prior = np.bincount(y) / len(y)
    types = sorted(set(words))
    drawn = dict(zip(types, rng.choice(len(prior), size=len(types), p=prior)))
    return np.asarray([drawn[w] for w in words], dtype=np.int64)


T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def interval(values: np.ndarray) -> tuple[float, float, float]:
    """(mean, low, high): a 95% Student-t interval over folds, clipped to [0, 1]."""
    n = len(values)
    mean = float(np.mean(values))
    if n < 2:
        return mean, mean, mean
    half = T_975.get(n - 1, 1.96) * float(np.std(values, ddof=1)) / math.sqrt(n)
    return mean, max(0.0, mean - half), min(1.0, mean + half)


@dataclass(frozen=True)
class ProbeLayer:
    layer: str  # "embedding", "after block 0", ...
    accuracy: float  # mean over folds
    low: float  # 95% interval over folds
    high: float
    control: float  # the control (shuffled labels, or the control task) over the same folds
    control_low: float
    control_high: float
    split_accuracy: float  # one stratified 80/20 split (the rule)
    split_control: float
    lens: float | None  # the logit lens's accuracy, where the label is a next piece

    @property
    def selectivity(self) -> float:
        return self.accuracy - self.control


@dataclass
class ProbeResult:
    model: str
    source: str
    label: str
    position: str
    n_examples: int
    classes: list[str]
    counts: list[int]
    folds: int
    stratified: bool
    control_kind: str  # "shuffled labels" or "control task (Hewitt & Liang)"
    majority: float  # accuracy of always answering the training folds' most common label
    rows: list[ProbeLayer]
    predictions: np.ndarray  # (N, L + 1) out-of-fold predicted class index per read and layer
    truth: np.ndarray  # (N,) class index
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    lens_note: str = ""

    @property
    def embedding(self) -> ProbeLayer:
        return self.rows[0]

    def table(self) -> list[dict]:
        out = []
        for row in self.rows:
            out.append({"layer": row.layer, "accuracy": row.accuracy, "low": row.low, "high": row.high,
                        "control": row.control, "selectivity": row.selectivity, "majority": self.majority,
                        "split 80/20": row.split_accuracy, "split control": row.split_control,
                        "logit lens": row.lens})
        return out

    def as_json(self) -> dict:
        return {"model": self.model, "source": self.source, "label": self.label, "position": self.position,
                "examples": self.n_examples, "classes": len(self.classes), "folds": self.folds,
                "stratified": self.stratified, "control": self.control_kind, "majority": self.majority,
                "seconds": round(self.seconds, 3), "sentence": probe_sentence(self), "notes": self.notes,
                "layers": self.table()}


def check_labels(labels: Sequence[str], folds: int) -> None:
    counts = Counter(labels)
    if len(counts) < 2:
        only = next(iter(counts), "")
        raise ProbeError(f"Every example has the label {only!r}: a probe needs at least two classes to tell apart.")
    if len(labels) < folds:
        raise ProbeError(f"{len(labels)} examples are fewer than the {folds} folds of the cross-validation; give at "
                         f"least {folds} (a few dozen per class to read anything).")


def probe_states(states: States, folds: int = FOLDS, seed: int = SEED, l2: float = L2, model: str = "",
                 source: str = "", label: str = "", position: str = "") -> ProbeResult:
    """A probe per layer on `states`: k-fold accuracy with its control, the 80/20 split, the baselines."""
    import time

    started = time.perf_counter()
    check_labels(states.labels, folds)
    classes = sorted(set(states.labels))
    index = {c: i for i, c in enumerate(classes)}
    y = np.asarray([index[label] for label in states.labels], dtype=np.int64)
    control = control_labels(y, states.words, seed)
    fold, stratified = fold_ids(y, folds, seed)
    x = np.transpose(states.x, (1, 0, 2))  # (L + 1, N, C)
    n_layer = x.shape[0]
    accuracy, control_accuracy, majority = [], [], []
    predictions = np.zeros((len(y), n_layer), dtype=np.int64)
    for k in range(folds):
        test, train = fold == k, fold != k
        both_x = np.concatenate([x[:, train], x[:, train]])  # real and control problems side by side
        both_y = np.concatenate([np.broadcast_to(y[train], (n_layer, train.sum())),
                                 np.broadcast_to(control[train], (n_layer, train.sum()))])
        predicted = fit_predict(both_x, both_y, np.concatenate([x[:, test], x[:, test]]), len(classes), l2)
        predictions[test] = predicted[:n_layer].T
        accuracy.append((predicted[:n_layer] == y[test]).mean(axis=1))
        control_accuracy.append((predicted[n_layer:] == control[test]).mean(axis=1))
        majority.append(float((y[test] == np.bincount(y[train], minlength=len(classes)).argmax()).mean()))
    accuracy, control_accuracy = np.asarray(accuracy), np.asarray(control_accuracy)  # (folds, L + 1)
    test = split_ids(y, SPLIT_TEST, seed)
    split = fit_predict(np.concatenate([x[:, ~test], x[:, ~test]]),
                        np.concatenate([np.broadcast_to(y[~test], (n_layer, (~test).sum())),
                                        np.broadcast_to(control[~test], (n_layer, (~test).sum()))]),
                        np.concatenate([x[:, test], x[:, test]]), len(classes), l2)
    split_acc = (split[:n_layer] == y[test]).mean(axis=1) if test.any() else np.full(n_layer, np.nan)
    split_ctl = (split[n_layer:] == control[test]).mean(axis=1) if test.any() else np.full(n_layer, np.nan)
    lens = states.lens.mean(axis=0) if states.lens is not None else None
    rows = []
    for layer in range(n_layer):
        acc, low, high = interval(accuracy[:, layer])
        ctl, ctl_low, ctl_high = interval(control_accuracy[:, layer])
        rows.append(ProbeLayer(states.layers[layer], acc, low, high, ctl, ctl_low, ctl_high,
                               float(split_acc[layer]), float(split_ctl[layer]),
                               None if lens is None else float(lens[layer])))
    notes = []
    if states.unknown:
        shown = ", ".join(repr(p) for p in states.unknown[:8]) + (" …" if len(states.unknown) > 8 else "")
        notes.append(f"The model does not know {len(states.unknown)} of the input's characters or pieces "
                     f"({shown}); it reads each as another, so states there mean little.")
    if states.dropped:
        notes.append(f"{states.dropped} example(s) could not be read (past what the model reads, or a span that "
                     "covers no piece) and are left out.")
    if not stratified:
        notes.append(f"Some class has fewer than {folds} examples, so the folds are not stratified.")
    counts = Counter(states.labels)
    return ProbeResult(model=model, source=source, label=label, position=position, n_examples=len(y),
                       classes=classes, counts=[counts[c] for c in classes], folds=folds, stratified=stratified,
                       control_kind="control task (Hewitt & Liang)" if any(states.words) else "shuffled labels",
                       majority=float(np.mean(majority)), rows=rows, predictions=predictions, truth=y,
                       seconds=time.perf_counter() - started, notes=notes, lens_note=states.lens_note)


def run_probes(model, tokenizer, source: LabelSource, name: str = "", folds: int = FOLDS, seed: int = SEED,
               progress: Progress | None = None) -> tuple[ProbeResult, States]:
    """The one call a page or the command makes: the states, then the probes (timed together)."""
    import time

    started = time.perf_counter()
    check_labels([e.label for e in source.examples], folds)
    states = collect_states(model, tokenizer, source, progress)
    result = probe_states(states, folds, seed, model=name, source=source.name, label=source.label,
                          position=source.position)
    result.seconds = time.perf_counter() - started
    return result, states


# --------------------------------------------------------------------------- the embedding map

UMAP_NOTE = ("The map is a PCA (the two directions of most variance); UMAP is drawn where the umap package is "
             "installed, and it is not installed here.")


def umap_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("umap") is not None


@dataclass
class MapPoints:
    xy: np.ndarray  # (N, 2)
    explained: tuple[float, float]  # each axis's share of the variance (PCA), or (nan, nan) for UMAP
    method: str  # "PCA" or "UMAP"


def project_2d(x: np.ndarray, method: str = "PCA", seed: int = SEED) -> MapPoints:
    """(N, C) states -> 2-D: PCA by SVD of the centred states (axes signed so the largest loading is positive, so a
    map does not flip between runs), or UMAP where the package is installed."""
    x = np.asarray(x, dtype=np.float64)
    if method == "UMAP" and umap_installed():
        import umap  # type: ignore[import-not-found]

        xy = umap.UMAP(n_components=2, random_state=seed).fit_transform(x)
        return MapPoints(np.asarray(xy, dtype=np.float64), (math.nan, math.nan), "UMAP")
    centred = x - x.mean(axis=0)
    if len(x) < 2:
        return MapPoints(np.zeros((len(x), 2)), (0.0, 0.0), "PCA")
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    axes = vt[:2]
    axes *= np.sign(axes[np.arange(len(axes)), np.abs(axes).argmax(axis=1)])[:, None]
    xy = centred @ axes.T
    if xy.shape[1] < 2:
        xy = np.concatenate([xy, np.zeros((len(x), 2 - xy.shape[1]))], axis=1)
    variance = (s ** 2) / max(float((s ** 2).sum()), 1e-12)
    return MapPoints(xy, (float(variance[0]), float(variance[1]) if len(variance) > 1 else 0.0), "PCA")


# --------------------------------------------------------------------------- the sentence


def decodable(row: ProbeLayer, majority: float) -> bool:
    """Above both baselines: the fold interval's low end over the control's high end and over the majority."""
    return row.low > max(row.control_high, majority)


def percent(x: float) -> str:
    return f"{100 * x:.0f}%"


def decoded_at(result: ProbeResult) -> ProbeLayer | None:
    """The first layer that is decodable (`decodable`) and holds at least half of the best layer's selectivity:
    where the label becomes readable, not where it is first a few points above chance."""
    best = max(r.selectivity for r in result.rows)
    return next((r for r in result.rows if decodable(r, result.majority) and r.selectivity >= 0.5 * best), None)


def embedding_decodes(result: ProbeResult) -> bool:
    """The embedding alone (before any block) already decodes the label: the pieces give it away."""
    return decoded_at(result) is result.rows[0]


def probe_sentence(result: ProbeResult) -> str:
    """Where the label becomes decodable against the controls; a warning when the embedding alone decodes it."""
    what = f"The {result.label}"
    best = max(result.rows, key=lambda r: r.accuracy)
    first = decoded_at(result)
    emb = result.embedding
    against = (f"the control ({result.control_kind}) {percent(best.control)}, the majority "
               f"{percent(result.majority)}")
    if first is None:
        return (f"{what} is not decodable at {result.position}: no layer's probe stands clear of both baselines "
                f"(best {percent(best.accuracy)} {best.layer}; {against}).")
    where = "already in the embedding" if first is emb else first.layer
    sentence = (f"{what} becomes decodable at {result.position} {where}: {percent(first.accuracy)} (95% interval "
                f"{percent(first.low)}-{percent(first.high)} over {result.folds} folds; {against})")
    if first is not emb:
        sentence += f", the embedding alone gives {percent(emb.accuracy)}"
    sentence += ("." if best is first else
                 f", and the best layer is {best.layer} at {percent(best.accuracy)}.")
    top = max(r.selectivity for r in result.rows)
    sentence += f" Selectivity (probe minus control) at its best: {100 * top:.0f} points."
    if first is emb:
        sentence += (f" Warning: the embedding alone already decodes it ({percent(emb.accuracy)}, before any block): "
                     "the pieces read give the label away (at the last piece of a name the surname tells the "
                     "country), so a high probe here says what the input spells, not what the model has worked out.")
    return sentence


# --------------------------------------------------------------------------- the command


def format_table(result: ProbeResult) -> str:
    head = f"{'layer':<16}{'accuracy':>9}{'95% interval':>15}{'control':>9}{'select.':>9}{'80/20':>7}{'lens':>7}"
    lines = [f"{result.model}: {result.source}, {result.n_examples} reads, {len(result.classes)} classes, "
             f"{result.folds} folds{' (stratified)' if result.stratified else ''}, {result.position}", head]
    for r in result.rows:
        lens = "" if r.lens is None else f"{r.lens:.3f}"
        lines.append(f"{r.layer:<16}{r.accuracy:>9.3f}{f'{r.low:.3f}-{r.high:.3f}':>15}{r.control:>9.3f}"
                     f"{r.selectivity:>9.3f}{r.split_accuracy:>7.3f}{lens:>7}")
    lines.append(f"majority {result.majority:.3f}; {result.seconds:.1f} s")
    lines += result.notes
    lines.append(probe_sentence(result))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import json
    import sys

    parser = argparse.ArgumentParser(prog="python -m core.lens.probes", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--world", help="the birthplace world's folder (people.tsv), e.g. data/knowledge")
    parser.add_argument("--label", default="country", choices=list(WORLD_LABELS))
    parser.add_argument("--at", default=None, help=f"world: {', '.join(WORLD_POSITIONS)} (default prompt); file: "
                        f"{', '.join(FILE_POSITIONS)} (default last); tags: {', '.join(TAG_POSITIONS)} (default word)")
    parser.add_argument("--file", help="a LABEL<TAB>TEXT file (or, with --tags, a token tag file)")
    parser.add_argument("--tags", action="store_true", help=f"--file is a token tag file: {TAG_FORMAT}")
    parser.add_argument("--limit", type=int, default=None, help="the world's first N people")
    parser.add_argument("--folds", type=int, default=FOLDS)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from core.io.checkpoint import load

    torch.set_num_threads(1)  # as the app runs: two threads on a busy 2-core box are ~10x slower here
    try:
        if bool(args.world) == bool(args.file):
            raise ProbeError("Give exactly one of --world FOLDER and --file FILE.")
        if args.world:
            source = world_source(args.world, args.label, args.at or "prompt", args.limit)
        else:
            text = Path(args.file).read_text(encoding="utf-8")
            name = Path(args.file).name
            source = tag_source(text, name, args.at or "word") if args.tags else \
                file_source(text, name, args.at or "last")
        loaded = load(args.checkpoint)
        result, _ = run_probes(loaded.model, loaded.tokenizer, source, name=Path(args.checkpoint).stem,
                               folds=args.folds, seed=args.seed)
    except (ProbeError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result.as_json(), indent=2) if args.json else format_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
