"""Modules built for their shapes only: on the meta device, without drawing their random initial weights.

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
_DRAWS = {torch.nn.init.normal_, torch.nn.init.trunc_normal_, torch.Tensor.normal_}


class _NoDraws(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _DRAWS:
            return args[0] if args else kwargs.get("tensor", kwargs.get("self"))
        return func(*args, **kwargs)


@contextlib.contextmanager
def shapes_only() -> Iterator[None]:
    """Modules built inside are on the meta device (no memory) and draw no initial weights."""
    with torch.device("meta"), _NoDraws():
        yield
