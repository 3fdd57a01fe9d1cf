"""The parameter table: one row per Part with its formula and the count on the real module, the totals
(trainable, frozen, buffer values) and the sums per role.

A tensor is counted once, in the first row that holds it. An output head that shares the embedding's weights
(weight tying: GPT-2, nanoGPT, Gemma, many LLaMA-family models) is a row of its own that counts nothing of
them: the same Parameter object, or (a converted nanoGPT checkpoint stores the tied tensor twice) a head
weight equal to the embedding's, compared only between head and embedding rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from core.lens.anatomy.formulas import ROLES, Formula, Part, walk


@dataclass
class PartRow:
    module: str
    role: str
    formula: str  # as the course writes it
    where: str  # symbol values
    formula_value: int
    parameters: int  # counted on the module
    trainable: int
    buffers: str  # e.g. "pe (5000×1×200)"; "" when none
    buffer_values: int
    note: str
    tied_to: str = ""  # the row(s) that count weights this row shares (weight tying); "" when none

    @property
    def matches(self) -> bool:
        return self.formula_value == self.parameters


def _tensor_count(tensors: Sequence[torch.Tensor]) -> int:
    return sum(t.numel() for t in tensors)


def _buffers(modules: Sequence[nn.Module]) -> list[tuple[str, torch.Tensor]]:
    return [(name, b) for m in modules for name, b in m.named_buffers()]


def _weight(part: Part) -> torch.Tensor | None:
    matrices = [p for p in part.parameters if p.dim() == 2]
    return matrices[0] if len(matrices) == 1 else None


def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a is b:
        return True
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device or a.device.type == "meta":
        return False
    with torch.no_grad():
        return bool(torch.equal(a, b))


@dataclass
class _Counting:
    owner: dict[int, int]  # id(parameter) -> the row that counts it
    copies: dict[int, int]  # id(head weight equal to an embedding's but stored apart) -> that embedding's row
    unique: dict[int, nn.Parameter]  # every parameter of the rows, once


def _counting(parts: Sequence[Part]) -> _Counting:
    embeddings = [(i, w) for i, part in enumerate(parts) if part.role == "embeddings"
                  and (w := _weight(part)) is not None]
    copies: dict[int, int] = {}
    for part in parts:
        weight = _weight(part) if part.role == "head" else None
        if weight is None:
            continue
        for j, embedding in embeddings:
            if embedding is not weight and _same_values(weight, embedding):
                copies[id(weight)] = j
                break
    owner: dict[int, int] = {}
    unique: dict[int, nn.Parameter] = {}
    order = sorted(range(len(parts)), key=lambda i: parts[i].role == "head")  # heads last: they share, not own
    for i in order:
        for p in parts[i].parameters:
            unique.setdefault(id(p), p)
            if id(p) not in copies:
                owner.setdefault(id(p), i)
    return _Counting(owner, copies, unique)


def _tied_formula(part: Part, count: int, shared_with: str) -> Formula:
    """What is left of a row once the weights it shares are counted in `shared_with`."""
    if count == 0:
        return Formula("0", note=f"the weights of {shared_with} (tied): counted once, there")
    symbol = next((s for s in ("V", "K", "O") if s in part.formula.symbols), None)
    if symbol is not None and part.formula.symbols[symbol] == count:  # a tied head with its own bias
        return Formula(symbol, {symbol: count}, f"its bias; the weight is counted in {shared_with} (tied)")
    return Formula(str(count), note=f"the rest shares the weights of {shared_with} (tied), counted there")


def parameter_table(model: nn.Module) -> list[PartRow]:
    model = getattr(model, "as_its_library_names_it", model)  # a Hugging Face model by its own module names
    parts = list(walk(model))
    counting = _counting(parts)
    rows = []
    for i, part in enumerate(parts):
        params = list({id(p): p for p in part.parameters}.values())
        own = [p for p in params if counting.owner.get(id(p)) == i]
        shared = sorted({counting.owner.get(id(p), counting.copies.get(id(p))) for p in params} - {i, None})
        tied_to = ", ".join(parts[j].name for j in shared)
        count = _tensor_count(own)
        if not part.modules and not own:  # a module's own tensors, every one counted in another row: no row
            continue
        formula = _tied_formula(part, count, tied_to) if tied_to else part.formula
        buffers = _buffers(part.modules)
        rows.append(PartRow(
            module=part.name, role=part.role, formula=formula.text, where=formula.where,
            formula_value=formula.value, parameters=count,
            trainable=_tensor_count([p for p in own if p.requires_grad]),
            buffers=", ".join(f"{n} ({'×'.join(map(str, b.shape))})" for n, b in buffers),
            buffer_values=_tensor_count([b for _, b in buffers]), note=formula.note, tied_to=tied_to,
        ))
    return rows


@dataclass
class ParameterTotals:
    total: int
    trainable: int
    non_trainable: int
    buffer_values: int  # numbers stored in buffers (e.g. a sinusoidal table): not parameters


def totals(model: nn.Module) -> ParameterTotals:
    """Every parameter once; a head weight stored apart but equal to the embedding's (tied) is not counted again."""
    model = getattr(model, "as_its_library_names_it", model)
    counting = _counting(list(walk(model)))
    params = [p for p in model.parameters() if id(p) not in counting.copies]
    trainable = _tensor_count([p for p in params if p.requires_grad])
    total = _tensor_count(params)
    return ParameterTotals(total, trainable, total - trainable, _tensor_count(list(model.buffers())))


def role_totals(rows: Sequence[PartRow]) -> dict[str, int]:
    """Parameters per role, in ROLES order, roles with no rows left out."""
    sums = {role: 0 for role in ROLES}
    seen = set()
    for row in rows:
        sums[row.role] += row.parameters
        seen.add(row.role)
    return {role: value for role, value in sums.items() if role in seen}
