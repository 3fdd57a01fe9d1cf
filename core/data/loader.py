"""Batches for one epoch, built off the training loop's critical path.

`epoch_batches` yields the epoch's items in the order `torch.randperm(len(dataset))` draws from a
generator seeded with `seed` (a documented contract a test can reproduce), stacked into batches as a
DataLoader would; a background thread builds them a few batches ahead, so Python's per-item work
(span corruption, tokenising) overlaps the accelerator's work instead of stalling it. An epoch-seeded
dataset is copied and set to its epoch, so the thread never races the loop over `set_epoch`.
"""

from __future__ import annotations

import copy
import queue
import threading
from collections.abc import Iterator

import torch
from torch.utils.data import Dataset

_DONE = object()


def epoch_view(dataset: Dataset, epoch: int) -> Dataset:
    """The dataset as it samples in `epoch` (a shallow copy for epoch-seeded datasets)."""
    if not hasattr(dataset, "set_epoch"):
        return dataset
    view = copy.copy(dataset)
    view.set_epoch(epoch)
    return view


def epoch_order(n: int, seed: int) -> list[int]:
    """The epoch's item order: one randperm from a generator seeded with `seed`."""
    generator = torch.Generator()
    generator.manual_seed(seed)
    return torch.randperm(n, generator=generator).tolist()


def trim_to_longest(x: torch.Tensor, y: torch.Tensor, pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Cut the columns after the last non-PAD target of any row: their targets are ignored by the loss
    and a causal model's earlier positions never read them, so the loss is the same for less work."""
    used = (y != pad_id).any(dim=0).nonzero()
    width = int(used[-1]) + 1 if len(used) else 1
    return x[:, :width], y[:, :width]


def _stack(dataset: Dataset, indices: list[int], pin: bool) -> tuple[torch.Tensor, torch.Tensor]:
    xs, ys = zip(*(dataset[i] for i in indices), strict=True)
    x, y = torch.stack(xs), torch.stack(ys)
    if getattr(dataset, "trim_to_longest", False):  # a dataset says so: causal models, PAD targets only
        x, y = trim_to_longest(x, y, getattr(dataset.tokenizer, "pad_id", 0))
        x, y = x.contiguous(), y.contiguous()
    return (x.pin_memory(), y.pin_memory()) if pin else (x, y)


def epoch_batches(dataset: Dataset, batch_size: int, epoch: int, seed: int, pin: bool = False,
                  prefetch: int = 8) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(x, y) batches of one epoch, in the seeded shuffled order, built by a helper thread."""
    view = epoch_view(dataset, epoch)
    order = epoch_order(len(view), seed)
    chunks = [order[i: i + batch_size] for i in range(0, len(order), batch_size)]
    ready: queue.Queue = queue.Queue(maxsize=max(1, prefetch))
    stop = threading.Event()

    def produce() -> None:
        try:
            for chunk in chunks:
                if stop.is_set():
                    return
                ready.put(_stack(view, chunk, pin))
            ready.put(_DONE)
        except BaseException as exc:  # handed to the consumer, re-raised there
            ready.put(exc)

    worker = threading.Thread(target=produce, name="epoch-batches", daemon=True)
    worker.start()
    try:
        while True:
            item = ready.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while worker.is_alive():  # unblock a producer waiting on a full queue
            try:
                ready.get_nowait()
            except queue.Empty:
                worker.join(timeout=0.01)
