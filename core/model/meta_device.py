"""Modules built without drawing their random initial weights: for their shapes only, on the meta device
(`shapes_only`), or on the CPU to have every weight loaded from a file next (`to_be_loaded`).

`with torch.device("meta")` alone allocates nothing, but an nn.Embedding (or any init.normal_) there runs
torch's Python reference of `normal_`, which imports torch._dynamo on its first call: 2.3-4.8 s of a server
process's first checkpoint load or first parameter count on this box (issue 52, item 5: a page's first visit).
Values on the meta device do not exist, so drawing them does nothing; skipping the draw changes no shape, name or
count. The mode is thread-local (torch's function-mode stack is per thread): a model another thread builds at the
same time is initialised as ever.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.overrides import TorchFunctionMode

# what initialises weights by drawing them (their meta versions are the ones that import torch._dynamo)
_DRAWS = frozenset({torch.nn.init.normal_, torch.nn.init.trunc_normal_, torch.Tensor.normal_})


class _Skipping(TorchFunctionMode):
    """Every function in `skipped` returns the tensor it would have filled, untouched; the rest run as ever."""

    def __init__(self, skipped: frozenset) -> None:
        super().__init__()
        self.skipped = skipped

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.skipped:
            return args[0] if args else kwargs.get("tensor", kwargs.get("self"))
        return func(*args, **kwargs)


@contextlib.contextmanager
def shapes_only() -> Iterator[None]:
    """Modules built inside are on the meta device (no memory) and draw no initial weights."""
    with torch.device("meta"), _Skipping(_DRAWS):
        yield


# what fills a new module's weights, drawn or set (nn.Linear, nn.Embedding, nn.LayerNorm and our _gpt2_init call these)
_FILLS = _DRAWS | {torch.nn.init.uniform_, torch.nn.init.kaiming_uniform_, torch.nn.init.kaiming_normal_,
                   torch.nn.init.xavier_uniform_, torch.nn.init.xavier_normal_, torch.nn.init.zeros_,
                   torch.nn.init.ones_, torch.nn.init.constant_, torch.Tensor.uniform_}


@contextlib.contextmanager
def to_be_loaded() -> Iterator[None]:
    """Modules built inside fill none of their weights (no random draw, no zeros or ones): for a model whose every
    weight a strict `load_state_dict` sets next, as a checkpoint's load does. Drawing the initial values only to
    overwrite them took a bundled checkpoint's load from ~20 to ~28 ms (`python -m bench.checkpoint_load`), and moved
    torch's global random state: loading a model changed the numbers a seeded script drew after it. Until loaded, the
    weights hold whatever memory held. Thread-local, like `shapes_only`."""
    with _Skipping(_FILLS):
        yield
