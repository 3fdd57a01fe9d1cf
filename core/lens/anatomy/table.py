"""The parameter table: one row per Part with its formula and the count on the real module, the totals
(trainable, frozen, buffer values) and the sums per role."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from core.lens.anatomy.formulas import ROLES, walk


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

    @property
    def matches(self) -> bool:
        return self.formula_value == self.parameters


def _tensor_count(tensors: Sequence[torch.Tensor]) -> int:
    return sum(t.numel() for t in tensors)


def _buffers(modules: Sequence[nn.Module]) -> list[tuple[str, torch.Tensor]]:
    return [(name, b) for m in modules for name, b in m.named_buffers()]


def parameter_table(model: nn.Module) -> list[PartRow]:
    rows = []
    for part in walk(model):
        params = [p for m in part.modules for p in m.parameters()]
        own = part.formula.value if not part.modules else _tensor_count(params)
        buffers = _buffers(part.modules)
        rows.append(PartRow(
            module=part.name, role=part.role, formula=part.formula.text, where=part.formula.where,
            formula_value=part.formula.value, parameters=own,
            trainable=own if not part.modules else _tensor_count([p for p in params if p.requires_grad]),
            buffers=", ".join(f"{n} ({'×'.join(map(str, b.shape))})" for n, b in buffers),
            buffer_values=_tensor_count([b for _, b in buffers]), note=part.formula.note,
        ))
    return rows


@dataclass
class ParameterTotals:
    total: int
    trainable: int
    non_trainable: int
    buffer_values: int  # numbers stored in buffers (e.g. a sinusoidal table): not parameters


def totals(model: nn.Module) -> ParameterTotals:
    params = list(model.parameters())
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
