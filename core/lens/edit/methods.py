"""Three ways to change one fact a model holds (Meng et al. 2022, ROME; 2023, MEMIT), each returning the
changed weights as a `WeightDelta` (the model passed in is never written to):

- rank-one (ROME): the MLP of one layer is a key-value memory: its output projection W maps the hidden
  activation k at the edited position (the key) to its output. The new value v = W k + delta, with delta
  found by Adam steps on a vector added to the MLP's output there until the question answers the new place;
  then W += (v - W k) (C^-1 k)^T / (k^T C^-1 k), C the second moment of that layer's keys over the
  pretraining corpus (`key_statistics`): the rank-one change that maps k to v and touches least what other
  keys read.
- finetune (ROME's FT-L): Adam steps on that one layer's output projection, on the one question, each step's
  change kept within +-eps of the original weights (an L-infinity norm constraint).
- memit (MEMIT): the new residual stream after the top layer of a range is found as above, then the change is
  spread over the range's MLPs from the bottom up, each solving R K^T (lambda C + K K^T)^-1 for its share;
  several facts at once solve one least-squares problem (`edit_together`).

The site is (layer, position class): the question's last position or the name's last piece.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from core.lens.edit.key_statistics import KeyCatcher, KeyStatistics, mlp_projection
from core.lens.edit.weights import WeightDelta, delta_from
from core.lens.trace import model_device
from core.lens.where_from.question import name_pieces, name_span
from core.model.hooks import Hooks
from core.model.tokenizer import MASK_CHAR
from core.model.transformer import Transformer

POSITIONS = {"last": "the question's last position", "subject": "the name's last piece"}


class EditError(ValueError):
    """An edit that cannot be made; str() is one sentence for the user."""


@dataclass(frozen=True)
class Site:
    layer: int
    position: str = "last"  # a key of POSITIONS

    @property
    def label(self) -> str:
        return f"MLP {self.layer} at {POSITIONS[self.position]}"


@dataclass
class EditOptions:
    steps: int = 60  # Adam steps for the new value (rank-one, memit) or the weights (finetune)
    lr: float = 0.1  # the value's learning rate
    target_prob: float = 0.9  # stop once every piece of the new answer has at least this probability
    weight_decay: float = 0.0  # on |delta|^2, relative to |W k|^2
    kl_weight: float = 0.0  # KL(original || edited) of the next piece at the question's other positions
    ridge: float = 1e-4  # added to C (relative to its mean diagonal) before solving
    ft_steps: int = 10
    ft_lr: float = 1e-3
    ft_eps: float = 5e-3  # finetune: |W - W0| <= eps elementwise
    memit_lambda: float = 1.0  # memit: weight of C against the edited keys


@dataclass
class EditRequest:
    name: str
    new_place: str

    @property
    def question(self) -> str:
        return f"Where was {self.name} born?"


@dataclass
class Prepared:
    """The question read as the model reads it, the new answer's pieces (ending with ⁇), the edited position."""

    request: EditRequest
    prompt_ids: list[int]
    target_ids: list[int]
    position: int
    name_positions: list[int]

    def teacher_forced(self) -> tuple[torch.Tensor, torch.Tensor, int]:
        """(input ids (1, T), target ids (1, n), the index of the first logit that predicts a target)."""
        ids = self.prompt_ids + self.target_ids[:-1]
        return (torch.tensor([ids], dtype=torch.long), torch.tensor([self.target_ids], dtype=torch.long),
                len(self.prompt_ids) - 1)


def check_editable(model) -> None:
    """Refuse models whose MLPs this module cannot read as a key-value memory, in one sentence."""
    if not isinstance(model, Transformer):
        raise EditError("Editing writes this lab's own Transformer's MLP weights; this model (a Hugging Face "
                        "folder) is not one, so open an Attention Lab checkpoint to edit it.")
    if model.config.head != "lm" or not model.config.causal:
        raise EditError("Only causal language models (birthplace checkpoints) answer the question an edit "
                        "changes.")
    for block in model.blocks:
        mlp = getattr(block, "mlp", None)
        if not (isinstance(mlp, nn.Sequential) and len(mlp) >= 3 and isinstance(mlp[0], nn.Linear)
                and isinstance(mlp[2], nn.Linear)):
            raise EditError(f"Block {block.layer} has no MLP (a Linear, a nonlinearity, a Linear) to edit: the "
                            "rank-one edit, MEMIT and FT-L all write an MLP's output projection, and only the "
                            "attention weights are left here.")


def check_site(model, site: Site) -> None:
    if site.position not in POSITIONS:
        raise EditError(f"The position class must be one of {', '.join(POSITIONS)}, not {site.position!r}.")
    if not 0 <= site.layer < len(model.blocks):
        raise EditError(f"This model has MLPs in layers 0 to {len(model.blocks) - 1}; there is no layer "
                        f"{site.layer}.")
    if unreachable(site, len(model.blocks)):
        raise EditError(f"The last layer's MLP at {POSITIONS[site.position]} writes nothing the answer reads "
                        "(only later layers carry an earlier position to the last), so an edit there cannot "
                        "change the answer; choose the last position or an earlier layer.")


def unreachable(site: Site, n_layer: int) -> bool:
    """The last layer at a position before the last cannot reach the answer (where_from's impossible cells)."""
    return site.layer == n_layer - 1 and site.position != "last"


def prepare(model, tokenizer, request: EditRequest, site: Site,
            known_places: Sequence[str] | None = None) -> Prepared:
    check_editable(model)
    check_site(model, site)
    name = " ".join((request.name or "").split())
    place = " ".join((request.new_place or "").split())
    if not name:
        raise EditError("Type the name of the person whose birthplace to change.")
    if not place:
        raise EditError("Choose the new birthplace.")
    if MASK_CHAR in name + place:
        raise EditError(f"{MASK_CHAR} ends the answer, so it cannot be part of a name or a place.")
    if known_places is not None and place not in known_places:
        raise EditError(f"{place!r} is not a place this world knows (the training answers and the demo "
                        "world's cities), so no question could be scored against it.")
    request = EditRequest(name, place)
    prompt = request.question + MASK_CHAR
    read = tokenizer.tokenize(prompt + place + MASK_CHAR)
    if read.unknown:
        shown = ", ".join(repr(p) for p in read.unknown[:5])
        raise EditError(f"This model's vocabulary lacks {shown}, so it cannot read the question or the place.")
    prompt_ids = tokenizer.encode(prompt)
    whole = tokenizer.encode(prompt + place + MASK_CHAR)
    if whole[:len(prompt_ids)] != prompt_ids:
        raise EditError("The place does not start a new piece after the question, so its pieces cannot be "
                        "taught as an answer.")
    target = whole[len(prompt_ids):]
    context = model.max_length or model.config.block_size
    if len(prompt_ids) + len(target) - 1 > context:
        raise EditError(f"The question and the new place take {len(prompt_ids) + len(target) - 1} pieces; "
                        f"this model reads at most {context}.")
    span = name_span(prompt, name)
    raw = tokenizer.tokenize(prompt).tokens
    names = name_pieces(tokenizer, prompt, prompt_ids, raw, span) if span else []
    if site.position == "subject" and not names:
        raise EditError("The name's pieces were not found in the question, so there is no name's last piece "
                        "to edit at; edit at the last position.")
    position = names[-1] if site.position == "subject" else len(prompt_ids) - 1
    return Prepared(request=request, prompt_ids=prompt_ids, target_ids=target, position=position,
                    name_positions=names)


# --------------------------------------------------------------------------- shared pieces


class _AddAt(Hooks):
    """Adds a vector to one hook point's output at one position (per batch row: positions (B,))."""

    def __init__(self, point: str, layer: int, positions: torch.Tensor, vectors: torch.Tensor) -> None:
        self.point, self.layer, self.positions, self.vectors = point, layer, positions, vectors

    def _add(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        if layer != self.layer:
            return x
        rows = torch.arange(x.size(0), device=x.device)
        bump = torch.zeros_like(x)
        bump[rows, self.positions] = self.vectors.to(x.dtype)  # (B, C) into (B, T, C)
        return x + bump

    def mlp_out(self, layer, y):
        return self._add(layer, y) if self.point == "mlp_out" else y

    def resid_post(self, layer, x):
        return self._add(layer, x) if self.point == "resid_post" else x


def _batch(items: Sequence[Prepared], device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded teacher-forced rows: (ids (B, T), targets (B, T) with -100 where not scored, edit
    positions (B,), last prompt positions (B,))."""
    rows = [p.prompt_ids + p.target_ids[:-1] for p in items]
    width = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    targets = torch.full((len(rows), width), -100, dtype=torch.long)
    for i, (p, r) in enumerate(zip(items, rows)):
        ids[i, :len(r)] = torch.tensor(r)
        start = len(p.prompt_ids) - 1
        targets[i, start:start + len(p.target_ids)] = torch.tensor(p.target_ids)
    positions = torch.tensor([p.position for p in items])
    lasts = torch.tensor([len(p.prompt_ids) - 1 for p in items])
    return ids.to(device), targets.to(device), positions.to(device), lasts.to(device)


def _logits(model, ids: torch.Tensor, hooks: Hooks | None = None, params: dict | None = None) -> torch.Tensor:
    """(B, T, V) logits, through `hooks`, with `params` standing in for the model's parameters of those names."""
    def run(idx: torch.Tensor) -> torch.Tensor:
        h, _ = model.hidden_states(idx, hooks=hooks)
        return model.head.unembed(h)

    return _call(model, params, run, ids) if params else run(ids)


def _call(model, params: dict, run: Callable, ids: torch.Tensor) -> torch.Tensor:
    """run(ids) with `params` standing in for the model's parameters of those names (the model untouched)."""
    class _Run(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, idx):
            return run(idx)

    return functional_call(_Run(model), {f"inner.{k}": v for k, v in params.items()}, (ids,))


def _answer_loss(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean NLL of the target pieces, the lowest probability among them per row)."""
    logp = F.log_softmax(logits.float(), -1)
    scored = targets != -100
    picked = logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (B, T)
    nll = -(picked * scored).sum() / scored.sum()
    lowest = torch.where(scored, picked, torch.zeros_like(picked)).min(dim=1).values.exp()
    return nll, lowest


def _keys(model, layer: int, ids: torch.Tensor, positions: torch.Tensor, params: dict | None = None
          ) -> torch.Tensor:
    """The layer's MLP keys at one position per row: (B, d_ff)."""
    with torch.no_grad(), KeyCatcher(model, [layer]) as catcher:
        if params:
            _call(model, params, lambda idx: model.hidden_states(idx)[0], ids)
        else:
            model.hidden_states(ids)
        keys = catcher.keys[layer]
    return keys[torch.arange(keys.size(0)), positions].detach()


def _optimise_vectors(model, items: Sequence[Prepared], point: str, layer: int, options: EditOptions,
                      at: torch.Tensor | None = None, params: dict | None = None,
                      pieces: tuple[int, int | None] = (0, None)) -> tuple[torch.Tensor, int, float]:
    """Vectors (B, C) added to `point` of `layer` at each item's position (or `at`) that make each question answer
    its new place (Adam; stops once every scored piece has options.target_prob). `params`: weights standing in for
    the model's (earlier updates); `pieces`: the slice of each answer's pieces scored. Returns (vectors, steps,
    final NLL)."""
    device = model_device(model)
    ids, targets, positions, _ = _batch(items, device)
    if at is not None:
        positions = at.to(device)
    first, end = pieces
    for i, item in enumerate(items):  # pieces outside the slice are not scored
        start = len(item.prompt_ids) - 1
        stop = start + (len(item.target_ids) if end is None else min(end, len(item.target_ids)))
        targets[i, :start + first] = -100
        targets[i, stop:] = -100
    width = model.config.n_embd
    delta = torch.zeros(len(items), width, device=device, requires_grad=True)
    optimiser = torch.optim.Adam([delta], lr=options.lr)
    base = None
    if options.kl_weight > 0:
        with torch.no_grad():
            base = F.log_softmax(_logits(model, ids, params=params).float(), -1)
    for p in model.parameters():
        p.requires_grad_(False)
    steps, nll_value = 0, float("nan")
    try:
        for steps in range(1, options.steps + 1):
            logits = _logits(model, ids, _AddAt(point, layer, positions, delta), params)
            nll, lowest = _answer_loss(logits, targets)
            nll_value = float(nll.detach())
            if bool((lowest >= options.target_prob).all()):
                steps -= 1
                break
            loss = nll + options.weight_decay * (delta ** 2).sum(-1).mean()
            if base is not None:
                # the next-piece distribution at the prompt's positions before the edited one stays as it was
                mask = torch.arange(ids.size(1), device=device)[None] < positions[:, None]
                kl = F.kl_div(F.log_softmax(logits.float(), -1), base, log_target=True, reduction="none").sum(-1)
                loss = loss + options.kl_weight * (kl * mask).sum() / mask.sum().clamp(min=1)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    finally:
        for p in model.parameters():
            p.requires_grad_(True)
    return delta.detach(), steps, nll_value


# --------------------------------------------------------------------------- the methods


def rank_one_update(weight: torch.Tensor, key: torch.Tensor, value: torch.Tensor, c_inv_key: torch.Tensor
                    ) -> torch.Tensor:
    """ROME's closed form: W + (v - W k) (C^-1 k)^T / (k^T C^-1 k). weight (C, d_ff), key (d_ff,), value (C,)."""
    residual = value - weight @ key  # (C,)
    return weight + torch.outer(residual, c_inv_key) / (key @ c_inv_key)


def rank_one(model, tokenizer, request: EditRequest, site: Site, stats: KeyStatistics,
             options: EditOptions | None = None, known_places: Sequence[str] | None = None) -> WeightDelta:
    """ROME's rank-one update at the site. A place of several pieces is written whole: when a later piece is not
    yet the answer's (the last layer at the last position reaches only the first piece: nothing after reads it),
    one more rank-one update writes it at the position that predicts it (the record counts the updates)."""
    options = options or EditOptions()
    start = time.perf_counter()
    item = prepare(model, tokenizer, request, site, known_places)
    device = model_device(model)
    ids, _, _, _ = _batch([item], device)
    proj = mlp_projection(model, site.layer)
    name = f"blocks.{site.layer}.mlp.2.weight"
    weight = proj.weight.detach().double().cpu()
    reaches_later = site.layer < len(model.blocks) - 1  # an earlier layer's output is read at later positions
    first = len(item.prompt_ids) - 1  # the position that predicts the first piece
    steps_total, nll, updates = 0, float("nan"), 0
    for piece in range(len(item.target_ids)):
        params = {name: weight.to(proj.weight.dtype).to(device)} if updates else None
        if piece:
            with torch.no_grad():
                probs = torch.softmax(_logits(model, ids, params=params)[0, first + piece:first + len(item.target_ids)]
                                      .float(), -1)
            wanted = probs[torch.arange(probs.size(0)), torch.tensor(item.target_ids[piece:])]
            if bool((wanted >= options.target_prob).all()):
                break
            if wanted[0] >= options.target_prob:
                continue
        position = item.position if piece == 0 else first + piece
        at = torch.tensor([position])
        key = _keys(model, site.layer, ids, at.to(device), params)[0].double().cpu()  # (d_ff,)
        scored = (piece, None if reaches_later or position != first + piece else piece + 1)
        delta, steps, nll = _optimise_vectors(model, [item], "mlp_out", site.layer, options, at, params, scored)
        value = weight @ key + delta[0].double().cpu()
        weight = rank_one_update(weight, key, value, stats.inverse_times(site.layer, key, options.ridge))
        steps_total += steps
        updates += 1
    record = _record("rank-one", item, site, options, steps_total, nll, start)
    record["updates"] = updates
    return delta_from(model, {name: weight.to(proj.weight.dtype)}, record)


def finetune(model, tokenizer, request: EditRequest, site: Site, stats: KeyStatistics | None = None,
             options: EditOptions | None = None, known_places: Sequence[str] | None = None) -> WeightDelta:
    """FT-L: the layer's MLP output projection, Adam on the question's answer, clamped to +-eps of the original.
    (The position class does not matter: the whole question is the training example.)"""
    options = options or EditOptions()
    start = time.perf_counter()
    item = prepare(model, tokenizer, request, site, known_places)
    device = model_device(model)
    ids, targets, _, _ = _batch([item], device)
    name = f"blocks.{site.layer}.mlp.2.weight"
    original = mlp_projection(model, site.layer).weight.detach()
    weight = original.clone().requires_grad_(True)
    optimiser = torch.optim.Adam([weight], lr=options.ft_lr)
    steps, nll_value = 0, float("nan")
    for steps in range(1, options.ft_steps + 1):
        logits = _logits(model, ids, params={name: weight})
        nll, lowest = _answer_loss(logits, targets)
        nll_value = float(nll.detach())
        if bool((lowest >= options.target_prob).all()):
            steps -= 1
            break
        optimiser.zero_grad()
        nll.backward()
        optimiser.step()
        with torch.no_grad():
            weight.copy_(original + (weight - original).clamp(-options.ft_eps, options.ft_eps))
    return delta_from(model, {name: weight.detach()}, _record("finetune", item, site, options, steps, nll_value,
                                                              start))


def memit_layers(site: Site, n_layer: int, span: int | None = None) -> list[int]:
    """The layers MEMIT spreads over: every layer up to the site's (at most `span` of them)."""
    span = site.layer + 1 if span is None else span
    return list(range(max(0, site.layer - span + 1), site.layer + 1))


def edit_together(model, tokenizer, requests: Sequence[EditRequest], site: Site, stats: KeyStatistics,
                  options: EditOptions | None = None, known_places: Sequence[str] | None = None) -> WeightDelta:
    """MEMIT: the residual stream after the site's layer is moved, for every request at once, and the change is
    shared by the MLPs of `memit_layers` (bottom up, each taking its share of what is left).

    A place of several pieces is written whole, as the rank-one edit does it but in MEMIT's own terms: where a
    later piece is not yet the answer's once the edit is made (the last layer at the last position reaches only
    the first piece: nothing after reads it), the stream at the position that predicts that piece gets a target
    too, and every target, the first ones included, is solved for again together from the original weights
    (one more key per such piece: the record's "keys")."""
    options = options or EditOptions()
    start = time.perf_counter()
    if not requests:
        raise EditError("There are no facts to edit.")
    items = [prepare(model, tokenizer, r, site, known_places) for r in requests]
    device = model_device(model)
    ids, _, positions, _ = _batch(items, device)
    top = site.layer
    layers = memit_layers(site, len(model.blocks))
    reaches_later = top < len(model.blocks) - 1  # a later layer carries this stream to the later positions
    scored = (0, None) if reaches_later or site.position != "last" else (0, 1)
    deltas, steps, nll = _optimise_vectors(model, items, "resid_post", top, options, pieces=scored)
    # the edited keys: (item row, position); their target streams after the top layer
    rows, at = list(range(len(items))), positions.tolist()
    targets = _top_stream(model, top, ids, rows, at, {}) + deltas.double().cpu()  # (K, C)
    params = _memit_solve(model, top, layers, stats, options, ids, rows, at, targets)
    for piece in range(1, max(len(it.target_ids) for it in items)):
        missing = _missing_piece(model, items, ids, piece, params, options.target_prob)
        if not missing:
            continue
        later = [len(items[i].prompt_ids) - 1 + piece for i in missing]  # the positions that predict the piece
        more, more_steps, nll = _optimise_vectors(
            model, [items[i] for i in missing], "resid_post", top, options,
            at=torch.tensor(later), params=params, pieces=(piece, None if reaches_later else piece + 1))
        steps += more_steps
        targets = torch.cat([targets, _top_stream(model, top, ids, missing, later, params) + more.double().cpu()])
        rows, at = rows + missing, at + later
        params = _memit_solve(model, top, layers, stats, options, ids, rows, at, targets)
    record = _record("memit", items[0], site, options, steps, nll, start)
    record["layers"] = layers
    record["keys"] = len(rows)
    if len(items) > 1:
        record["facts"] = [{"name": it.request.name, "new_place": it.request.new_place} for it in items]
    return delta_from(model, params, record)


def _top_stream(model, top: int, ids: torch.Tensor, rows: list[int], at: list[int], params: dict
                ) -> torch.Tensor:
    """The residual stream after layer `top` at (row, position) pairs, with `params` standing in: (K, C)."""
    catcher = _Keep(top)
    batch = ids[torch.tensor(rows, device=ids.device)]
    with torch.no_grad():
        if params:
            _call(model, params, lambda idx: model.hidden_states(idx, hooks=catcher)[0], batch)
        else:
            model.hidden_states(batch, hooks=catcher)
    return catcher.kept[torch.arange(len(rows)), torch.tensor(at)].double().cpu()


def _memit_solve(model, top: int, layers: list[int], stats: KeyStatistics, options: EditOptions,
                 ids: torch.Tensor, rows: list[int], at: list[int], targets: torch.Tensor) -> dict:
    """MEMIT's update, from the original weights, that moves the stream after `top` to `targets` (K, C) at the K
    (row, position) pairs: the MLPs of `layers` from the bottom up, each solving dW = R K^T (lambda C + K K^T)^-1
    for its share of what is left."""
    device = model_device(model)
    batch = ids[torch.tensor(rows, device=ids.device)]
    where = torch.tensor(at, device=device)
    params: dict[str, torch.Tensor] = {}
    for i, layer in enumerate(layers):
        name = f"blocks.{layer}.mlp.2.weight"
        current = params.get(name, mlp_projection(model, layer).weight.detach()).double().cpu()
        keys = _keys(model, layer, batch, where, params).double().cpu().T  # (d_ff, K)
        residual = (targets - _top_stream(model, top, ids, rows, at, params)).T / (len(layers) - i)  # (C, K)
        c = stats.moments[layer].double()
        c = c + options.ridge * c.diagonal().mean() * torch.eye(c.size(0), dtype=c.dtype)
        # dW = R K^T (lambda C + K K^T)^-1, solved as a linear system (the matrix is symmetric)
        lhs = options.memit_lambda * c + keys @ keys.T
        change = torch.linalg.solve(lhs, keys @ residual.T).T  # (C, d_ff)
        params[name] = (current + change).to(mlp_projection(model, layer).weight.dtype).to(device)
    return params


def _missing_piece(model, items: Sequence[Prepared], ids: torch.Tensor, piece: int, params: dict,
                   target_prob: float) -> list[int]:
    """The items whose answer has a `piece` the edited model (teacher-forced on the new answers, one pass over the
    batch `ids`) gives less than `target_prob`."""
    rows = [i for i, it in enumerate(items) if piece < len(it.target_ids)]
    if not rows:
        return []
    with torch.no_grad():
        probs = torch.softmax(_logits(model, ids[rows], params=params).float(), -1)  # (R, T, V)
    return [i for r, i in enumerate(rows)
            if float(probs[r, len(items[i].prompt_ids) - 1 + piece, items[i].target_ids[piece]]) < target_prob]


def memit(model, tokenizer, request: EditRequest, site: Site, stats: KeyStatistics,
          options: EditOptions | None = None, known_places: Sequence[str] | None = None) -> WeightDelta:
    return edit_together(model, tokenizer, [request], site, stats, options, known_places)


class _Keep(Hooks):
    def __init__(self, layer: int) -> None:
        self.layer = layer
        self.kept: torch.Tensor | None = None

    def resid_post(self, layer, x):
        if layer == self.layer:
            self.kept = x
        return x


def _record(method: str, item: Prepared, site: Site, options: EditOptions, steps: int, nll: float,
            start: float) -> dict:
    return {"method": method, "name": item.request.name, "new_place": item.request.new_place,
            "layer": site.layer, "position": site.position, "steps": steps, "final_nll": round(nll, 6),
            "seconds": round(time.perf_counter() - start, 4), "options": asdict(options)}


@dataclass(frozen=True)
class Method:
    label: str
    run: Callable[..., WeightDelta]
    needs_statistics: bool
    what: str = field(default="")


METHODS: dict[str, Method] = {
    "rank-one": Method("rank-one (ROME)", rank_one, True,
                       "one MLP's output projection, a rank-one change that maps the edited key to a new value"),
    "finetune": Method("finetuning (FT-L)", finetune, False,
                       "one MLP's output projection, Adam steps on the question, each weight within +-eps"),
    "memit": Method("MEMIT", memit, True,
                    "the MLPs of every layer up to the chosen one, each taking a share of the change"),
}


def edit(model, tokenizer, method: str, request: EditRequest, site: Site, stats: KeyStatistics | None,
         options: EditOptions | None = None, known_places: Sequence[str] | None = None) -> WeightDelta:
    if method not in METHODS:
        raise EditError(f"The method must be one of {', '.join(METHODS)}, not {method!r}.")
    chosen = METHODS[method]
    if chosen.needs_statistics and stats is None:
        raise EditError(f"{chosen.label} needs the key statistics of the pretraining corpus.")
    return chosen.run(model, tokenizer, request, site, stats, options, known_places)
