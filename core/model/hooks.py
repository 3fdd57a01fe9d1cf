"""Hook points of one forward pass: where an analysis may read, or replace, what the model computes.

TransformerLens names a `HookPoint` at every activation; here one `Hooks` object rides on the forward call's
`Step` and every block calls it at the same few places, in this order per layer:

    resid_pre(layer, x)      the residual stream entering the block            (B, T, C)
    heads(layer, z, proj)    each head's value-weighted sum before the output projection (B, nh, T, hs),
                             and the projection itself (so head h's share of the residual is z_h @ W_h^T)
    attn_out(layer, y)       the attention sublayer's output, added to the residual (B, T, C)
    mlp_out(layer, y)        the MLP sublayer's output                            (B, T, C)
    resid_post(layer, x)     the residual stream leaving the block                (B, T, C)

plus `embed(x)` on the token embeddings before any positional scheme (B, T, C) and `final(x)` on the stream
entering the final LayerNorm. Each method returns the tensor the model goes on with: the base class returns
it unchanged (a recorder keeps a copy; a patcher returns restored values). With no hooks on the Step the
model runs exactly as before. `core.lens.trace` records through these points; causal tracing patches through
them; there is no second implementation of the model anywhere.
"""

from __future__ import annotations

import torch
from torch import nn


class Hooks:
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def resid_pre(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        return x

    def heads(self, layer: int, z: torch.Tensor, proj: nn.Linear) -> None:
        return None

    def attn_out(self, layer: int, y: torch.Tensor) -> torch.Tensor:
        return y

    def mlp_out(self, layer: int, y: torch.Tensor) -> torch.Tensor:
        return y

    def resid_post(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        return x

    def final(self, x: torch.Tensor) -> torch.Tensor:
        return x


def head_contributions(z: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Each head's share of an output projection y = concat_h(z_h) @ W^T + b, without the bias:
    z (B, nh, T, hs), W (C, nh * hs) -> (B, nh, T, C); summed over heads and plus b it is y."""
    n_head, hs = z.size(1), z.size(-1)
    return torch.einsum("bhtd,chd->bhtc", z, weight.view(weight.size(0), n_head, hs))


class Recorder(Hooks):
    """Keeps batch row 0 of every hook point, detached, as float32 on the CPU (what `Trace` records)."""

    def __init__(self) -> None:
        self.embedded: torch.Tensor | None = None
        self.pre: list[torch.Tensor] = []
        self.head_out: list[torch.Tensor | None] = []
        self.attn: list[torch.Tensor] = []
        self.mlp: list[torch.Tensor] = []
        self.post: list[torch.Tensor] = []
        self.attn_bias: list[torch.Tensor | None] = []

    @staticmethod
    def _keep(x: torch.Tensor) -> torch.Tensor:
        return x[0].detach().float().cpu()

    def embed(self, x):
        self.embedded = self._keep(x)
        return x

    def resid_pre(self, layer, x):
        self.pre.append(self._keep(x))
        return x

    def heads(self, layer, z, proj):
        self.head_out.append(self._keep(head_contributions(z, proj.weight)))  # (nh, T, C)
        self.attn_bias.append(None if proj.bias is None else proj.bias.detach().float().cpu())

    def attn_out(self, layer, y):
        if len(self.head_out) <= layer:  # a layer whose attention reported no heads
            self.head_out.append(None)
            self.attn_bias.append(None)
        self.attn.append(self._keep(y))
        return y

    def mlp_out(self, layer, y):
        self.mlp.append(self._keep(y))
        return y

    def resid_post(self, layer, x):
        self.post.append(self._keep(x))
        return x


class StreamRecorder(Hooks):
    """Keeps every batch row of the residual stream only: the embedding (entering block 0) and the stream leaving
    each block, detached, float32 on the CPU (what `trace_batch(..., streams=True)` records for the probes)."""

    def __init__(self) -> None:
        self.pre0: torch.Tensor | None = None
        self.post: list[torch.Tensor] = []

    def resid_pre(self, layer, x):
        if layer == 0:
            self.pre0 = x.detach().float().cpu()
        return x

    def resid_post(self, layer, x):
        self.post.append(x.detach().float().cpu())
        return x

    def stacked(self) -> torch.Tensor:
        """(L + 1, B, T, C): the embedding, then the stream after each block."""
        return torch.stack([self.pre0, *self.post])
