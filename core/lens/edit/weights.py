"""An edit's weights as a delta: the tensors it replaces, before and after, so that it can be applied to a
model and undone bitwise; and the model a session edits (a copy, never the shared cached one)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass
class WeightDelta:
    """name -> the tensor before and after the edit (CPU copies, exact). Applying writes `after` into the
    model's parameters; undoing writes `before` back, so the state dict is bitwise what it was."""

    before: dict[str, torch.Tensor]
    after: dict[str, torch.Tensor]
    record: dict = field(default_factory=dict)  # what was edited, how (plain JSON values, for the metadata)

    @property
    def names(self) -> list[str]:
        return list(self.after)

    def change(self, name: str) -> torch.Tensor:
        return self.after[name] - self.before[name]

    def apply(self, model: nn.Module) -> None:
        _write(model, self.after)

    def undo(self, model: nn.Module) -> None:
        _write(model, self.before)


def _write(model: nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, value in tensors.items():
            params[name].copy_(value.to(params[name].device, params[name].dtype))


def delta_from(model: nn.Module, new: dict[str, torch.Tensor], record: dict) -> WeightDelta:
    """The delta that turns `model`'s current parameters `new.keys()` into `new` (the model is not changed)."""
    params = dict(model.named_parameters())
    return WeightDelta(before={n: params[n].detach().cpu().clone() for n in new},
                       after={n: t.detach().cpu().clone() for n, t in new.items()}, record=record)


@dataclass
class EditedModel:
    """One session's edited copy of a model and the edits applied to it, newest last. The model it was
    copied from is never written to."""

    model: nn.Module
    edits: list[WeightDelta] = field(default_factory=list)

    @classmethod
    def copy_of(cls, model: nn.Module) -> EditedModel:
        edited = copy.deepcopy(model)
        edited.eval()
        return cls(model=edited)

    def apply(self, delta: WeightDelta) -> None:
        delta.apply(self.model)
        self.edits.append(delta)

    def undo(self) -> WeightDelta | None:
        """Undo the newest edit (None when there is none)."""
        if not self.edits:
            return None
        delta = self.edits.pop()
        delta.undo(self.model)
        return delta

    @property
    def records(self) -> list[dict]:
        return [d.record for d in self.edits]


EDITS_KEY = "edits"  # the metadata entry of an edited checkpoint: every edit, oldest first


STANDARD_KEYS = ("format", "config", "tokenizer", "task", "labels", "history", "metrics", "data", "command", "seed",
                 "versions", "created")


def save_edited(path, edited: EditedModel, tokenizer, source_metadata: dict, source_name: str = "") -> None:
    """A new checkpoint of the edited weights (core.io.checkpoint.save, atomic) whose metadata keeps the source's
    (task, labels, data, history and the rest) and records every edit (`edits`: the source's own edits, if any,
    then this session's, oldest first) and the file it was edited from (`edited_from`)."""
    import json

    from core.io.checkpoint import save

    earlier = source_metadata.get(EDITS_KEY) or []
    if isinstance(earlier, str):
        earlier = json.loads(earlier)
    passed = {k: v for k, v in source_metadata.items() if k not in (*STANDARD_KEYS, EDITS_KEY, "edited_from")}
    save(path, edited.model, tokenizer, source_metadata.get("task") or "birthplace",
         labels=source_metadata.get("labels") or None, history=source_metadata.get("history") or None,
         metrics=source_metadata.get("metrics") or None, data=source_metadata.get("data") or None,
         command=f"edited from {source_name}" if source_name else "edited", seed=source_metadata.get("seed"),
         extra={**passed, EDITS_KEY: [*earlier, *edited.records], "edited_from": source_name})
