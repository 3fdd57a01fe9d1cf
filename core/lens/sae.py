"""Sparse-autoencoder features of a lab model: what a layer's residual stream (or MLP output) is made of.

The SAE is TopK (Gao et al. 2024, "Scaling and evaluating sparse autoencoders"): z = TopK(W_enc (x - b_dec) +
b_enc), x_hat = W_dec z + b_dec, the k largest pre-activations kept (ReLU'd), the rest zero. TopK is the default
and the only kind here because its sparsity is set directly (k latents per piece, no L1 coefficient to tune
against the reconstruction) and it has no L1 shrinkage (an L1 penalty pulls every active latent towards zero, so
ReLU+L1 SAEs under-reconstruct and need a fine-tuning pass to undo it). Dead latents (never in the top k for
`DEAD_STEPS` steps) get Gao's auxiliary loss AuxK: the top `aux_k` dead latents reconstruct the residual error,
weighted 1/32, so they receive gradient again. Decoder rows are kept unit-norm (their gradient's component along
the row removed, then renormalised after each step), so a latent's activation is its contribution's length.

Inputs are normalised as the literature does: multiplied by one `scale` so that the mean squared norm over the
training text is d_model (kept in the file; `SparseAutoencoder.forward` takes and gives model units). Width =
expansion x d_model. Training: Adam, activations read by `core.lens.trace.trace` (one window of block_size pieces
of the model's own training text at a time, in a seeded order) into a buffer of bounded size that is refreshed as
training goes (`ActivationBuffer`), batches drawn from it at random, a fixed seed, progress callbacks.

Reported on held-out text (the model's validation split: the last val_fraction of its recorded corpus): the
fraction of variance unexplained (FVU = sum |x - x_hat|^2 / sum |x - mean x|^2) and the model's loss with the SAE
spliced in (the site replaced by its reconstruction through the model's hook points, core.model.hooks), against
the model's own loss and against zero-ablation of the site.

After training, each feature's activation density (the share of pieces it fires on) and its top activating
contexts are computed once over the training text and stored in the SAE file as tensors, so a feature page is a
lookup. Logit effects (the pieces a feature raises and lowers) read its decoder direction through the final
LayerNorm with its scale frozen at its mean over the text (as direct attribution does, core.lens.where_from) and
the unembedding: the feature's direct effect on the next piece, not what later layers make of it. Steering adds
scale x the decoder direction (model units) to the residual stream leaving the layer at every position.

The file: `<checkpoint>.sae-L<layer>-<site>.safetensors` beside the model, its metadata naming the model file's
sha256; `load_sae` refuses an SAE made for other weights.

    python -m core.lens.sae train CHECKPOINT --layer 1 [--site resid|mlp] [--expansion 8] [--k 32] [--steps N]
    python -m core.lens.sae show SAE_FILE --feature N [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from core.lens.edit.key_statistics import file_sha256
from core.lens.trace import model_device, trace
from core.model.hooks import Hooks

FORMAT = "attention-lab-sae/1"
SITES = ("resid", "mlp")
SITE_LABELS = {"resid": "residual stream leaving block", "mlp": "MLP output of block"}
DEAD_STEPS = 200  # a latent not among the top k of any row for this many steps is dead (AuxK trains it)
AUX_WEIGHT = 1 / 32  # Gao et al.'s alpha
TOP_CONTEXTS = 10  # contexts kept per feature
BEFORE, AFTER = 12, 4  # pieces kept around a context's top piece
STATS_WINDOWS = 400  # windows of training text read for densities and top contexts (51k pieces at 128)
EVAL_WINDOWS = 200  # held-out windows for FVU and the spliced-in loss


class SAEError(ValueError):
    """An SAE that cannot be trained, loaded or shown; str() is one sentence for the user."""


Progress = Callable[[str, int, int], None]  # (stage, done, total)


@dataclass
class SAESettings:
    layer: int
    site: str = "resid"
    expansion: int = 8
    # k 32, lr 3e-3 on lm-learned's layer 1 (1,500 steps, batch 1,024): FVU 0.091, spliced-in loss +8.5%; k 16 gave
    # 0.139 / +15.5% (lr 3e-3) and 0.152 / +17.5% (lr 1e-3), k 24 0.113 / +10.7% (`fit` on
    # cached activations of its training text, `evaluate` on the held-out part, 2026-12-07)
    k: int = 32
    steps: int = 1500
    batch_size: int = 1024
    lr: float = 3e-3
    seed: int = 0
    aux_k: int = 0  # 0: d_model / 2 (Gao et al.)
    buffer_rows: int = 65_536  # activations held at once (bounded memory: 32 MB at width 128)
    refresh: float = 0.25  # share of the buffer replaced by fresh windows after each pass over it


class SparseAutoencoder(nn.Module):
    def __init__(self, d_model: int, width: int, k: int, scale: float = 1.0, aux_k: int = 0) -> None:
        super().__init__()
        if not 1 <= k <= width:
            raise SAEError(f"k must be between 1 and the SAE's width {width}, not {k}.")
        self.d_model, self.width, self.k = d_model, width, k
        self.aux_k = aux_k or max(1, d_model // 2)
        self.scale = float(scale)  # model units x scale = the SAE's units (mean squared norm d_model)
        self.W_dec = nn.Parameter(F.normalize(torch.randn(width, d_model), dim=1))  # (F, C), rows unit-norm
        self.W_enc = nn.Parameter(self.W_dec.detach().T.clone())  # (C, F): Gao et al. initialise it as W_dec^T
        self.b_enc = nn.Parameter(torch.zeros(width))
        self.b_dec = nn.Parameter(torch.zeros(d_model))

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.b_dec) @ self.W_enc + self.b_enc  # (N, F), x in SAE units

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """x (N, C) in SAE units -> z (N, F): the top k pre-activations (ReLU'd), zero elsewhere."""
        pre = self.pre_activations(x)
        top = pre.topk(self.k, dim=-1)
        return torch.zeros_like(pre).scatter_(-1, top.indices, F.relu(top.values))

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return z @ self.W_dec + self.b_dec

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Reconstruction in model units of x (..., C) in model units."""
        shape = x.shape
        flat = x.reshape(-1, shape[-1]).float() * self.scale
        return (self.decode(self.encode(flat)) / self.scale).reshape(shape).to(x.dtype)

    def direction(self, feature: int) -> torch.Tensor:
        """(C,) what one unit of the feature's activation adds to the stream, in model units."""
        return self.W_dec[feature].detach() / self.scale

    @torch.no_grad()
    def normalise_decoder(self) -> None:
        self.W_dec.data = F.normalize(self.W_dec.data, dim=1)

    @torch.no_grad()
    def drop_parallel_gradient(self) -> None:
        """Remove each decoder row's gradient along the row itself (the step would only change its norm)."""
        if self.W_dec.grad is not None:
            w = self.W_dec.data
            self.W_dec.grad -= (self.W_dec.grad * w).sum(1, keepdim=True) * w


# ---------------------------------------------------------------------------------------------- what is read


def check_site(model, layer: int, site: str) -> None:
    n_layer = model.config.n_layer
    if site not in SITES:
        raise SAEError(f"The site must be one of {', '.join(SITES)}, not {site!r}.")
    if not 0 <= layer < n_layer:
        raise SAEError(f"This model has layers 0 to {n_layer - 1}; there is no layer {layer}.")
    if site == "mlp" and not model.config.mlp:
        raise SAEError("This model has no MLPs (attention only); train on the residual stream instead.")


def site_activations(record, layer: int, site: str) -> np.ndarray:
    """(T, C) the site's activations in one Trace."""
    acts = record.activations
    block = acts.resid_post if site == "resid" else acts.mlp_out
    if block is None:
        raise SAEError(f"This architecture records no {SITE_LABELS[site]} {layer}.")
    return block[layer]


def windows_of(ids: Sequence[int], length: int) -> list[list[int]]:
    """Consecutive windows of `length` pieces (the last one shorter, dropped below 2 pieces)."""
    out = [list(ids[i: i + length]) for i in range(0, len(ids), length)]
    return [w for w in out if len(w) >= 2]


@dataclass
class ModelText:
    """A model's training text cut into its train and held-out windows (pieces)."""

    train: list[list[int]]
    held_out: list[list[int]]
    source: str
    notes: list[str] = field(default_factory=list)


def model_text(loaded, text: str | None = None) -> ModelText:
    """The training text the checkpoint's `data` metadata names (train: all but the last val_fraction;
    held out: that last part), or `text` given directly (its last 10% held out)."""
    from core.lens.extrapolation.scoring import ExtrapolationError, dev_text_from_metadata, resolve_data_path

    window = window_length(loaded.model)
    notes: list[str] = []
    if text is None:
        data = loaded.metadata.get("data") or []
        if not data or not isinstance(data[0], dict) or not data[0].get("path"):
            raise SAEError("This checkpoint records no training text; give a text file with --text.")
        path = resolve_data_path(str(data[0]["path"]))
        if path is None:
            raise SAEError(f"The text {data[0]['path']} that this model was trained on is not on this machine.")
        full = path.read_text(encoding="utf-8", errors="replace")
        try:
            dev = dev_text_from_metadata(loaded.metadata)
        except ExtrapolationError as exc:
            raise SAEError(str(exc)) from None
        notes += dev.notes
        held = dev.text
        train = full[: len(full) - len(held)]
        source = f"{data[0]['path']} ({dev.source} held out)"
    else:
        cut = int(len(text) * 0.9)
        train, held, source = text[:cut], text[cut:], "the given text (its last 10% held out)"
    if not train.strip():
        raise SAEError("The text is empty: there is nothing to train an SAE on.")
    train_ids = loaded.tokenizer.tokenize(train).ids
    held_ids = loaded.tokenizer.tokenize(held).ids if held.strip() else []
    train_windows = windows_of(train_ids, window)
    if not train_windows:
        raise SAEError("The text is too short: it has fewer than two pieces this model reads.")
    held_windows = windows_of(held_ids, window) or train_windows[-1:]
    return ModelText(train_windows, held_windows, source, notes)


def window_length(model) -> int:
    limit = model.max_length
    return model.config.block_size if limit is None else min(model.config.block_size, limit)


class ActivationBuffer:
    """A bounded buffer of the site's activations, filled by tracing windows in a seeded order (cycling through
    the text); batches are drawn from it at random and `refresh()` replaces part of it with fresh windows."""

    def __init__(self, model, windows: list[list[int]], layer: int, site: str, rows: int, seed: int) -> None:
        self.model, self.windows, self.layer, self.site = model, windows, layer, site
        self.rng = np.random.default_rng(seed)
        self.order = self.rng.permutation(len(windows))
        self.next = 0
        self.windows_read = 0
        total = sum(len(w) for w in windows)
        self.rows = min(rows, total)
        self.data = torch.empty(self.rows, model.config.n_embd)
        self.generator = torch.Generator().manual_seed(seed)
        self._fill(0, self.rows)

    def _read(self, n: int) -> torch.Tensor:
        """The next `n` activations, each window's rows copied out of its Trace (so no Trace is kept alive)."""
        out = torch.empty(n, self.data.shape[1])
        got = 0
        while got < n:
            w = self.windows[self.order[self.next]]
            self.next += 1
            self.windows_read += 1
            if self.next == len(self.order):
                self.order, self.next = self.rng.permutation(len(self.windows)), 0
            x = site_activations(trace(self.model, w, activations=True), self.layer, self.site)
            take = min(len(x), n - got)
            out[got: got + take] = torch.from_numpy(x[:take])
            got += take
        return out

    def _fill(self, start: int, n: int) -> None:
        self.data[start: start + n] = self._read(n)

    def refresh(self, share: float) -> None:
        n = int(self.rows * share)
        if n:
            where = torch.randperm(self.rows, generator=self.generator)[:n]
            self.data[where] = self._read(n)

    def batch(self, size: int) -> torch.Tensor:
        return self.data[torch.randint(0, self.rows, (min(size, self.rows),), generator=self.generator)]


# ---------------------------------------------------------------------------------------------- training


@dataclass
class Evaluation:
    fvu: float
    model_loss: float
    spliced_loss: float
    zero_loss: float
    pieces: int  # held-out pieces the losses are over

    @property
    def recovered(self) -> float:
        """Share of the loss gap between zero-ablation and the model that the SAE's reconstruction recovers."""
        gap = self.zero_loss - self.model_loss
        return float("nan") if gap == 0 else (self.zero_loss - self.spliced_loss) / gap


class Splice(Hooks):
    """Replace the site (resid_post or mlp_out of one layer) by `replace(x)` in a forward pass."""

    def __init__(self, layer: int, site: str, replace: Callable[[torch.Tensor], torch.Tensor]) -> None:
        self.layer, self.site, self.replace = layer, site, replace

    def mlp_out(self, layer, y):
        return self.replace(y) if self.site == "mlp" and layer == self.layer else y

    def resid_post(self, layer, x):
        return self.replace(x) if self.site == "resid" and layer == self.layer else x


class Steer(Hooks):
    """Add `vector` (C,) to the residual stream leaving block `layer`, at every position."""

    def __init__(self, layer: int, vector: torch.Tensor) -> None:
        self.layer, self.vector = layer, vector

    def resid_post(self, layer, x):
        return x + self.vector.to(x.dtype) if layer == self.layer else x


@torch.no_grad()
def _loss(model, windows: list[list[int]], hooks: Hooks | None) -> tuple[float, int]:
    """Mean next-piece loss (nats) over the windows with the hooks in the pass; PAD targets not scored."""
    device = model_device(model)
    total, count = 0.0, 0
    by_length: dict[int, list[list[int]]] = {}
    for w in windows:
        by_length.setdefault(len(w), []).append(w)
    for rows in by_length.values():
        for lo in range(0, len(rows), 8):  # 8 windows a pass: (8, T, V) logits stay small
            idx = torch.tensor(rows[lo: lo + 8], dtype=torch.long, device=device)
            h, _ = model.hidden_states(idx[:, :-1], hooks=hooks)
            logits = model.head.unembed(h).float()
            targets = idx[:, 1:]
            losses = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                                     ignore_index=model.config.pad_id, reduction="sum")
            total += float(losses)
            count += int((targets != model.config.pad_id).sum())
    return total / max(count, 1), count


@torch.no_grad()
def evaluate(model, sae: SparseAutoencoder, windows: list[list[int]], layer: int, site: str) -> Evaluation:
    """FVU of the site's reconstruction and the next-piece loss with it spliced in, zero-ablated and untouched."""
    windows = windows[:EVAL_WINDOWS]
    error, total, total_sq, n = 0.0, 0.0, 0.0, 0  # sums over windows: one window's latents at a time in memory
    for w in windows:
        x = torch.from_numpy(site_activations(trace(model, w, activations=True), layer, site).copy())
        error += float(((x.double() - sae(x).double()) ** 2).sum())
        total = total + x.double().sum(0)
        total_sq += float((x.double() ** 2).sum())
        n += len(x)
    variance = total_sq - float((total ** 2).sum()) / max(n, 1)  # sum |x - mean x|^2
    fvu = error / max(variance, 1e-12)
    if not has_output_head(model):
        nan = float("nan")
        return Evaluation(fvu, nan, nan, nan, 0)
    clean, n = _loss(model, windows, None)
    spliced, _ = _loss(model, windows, Splice(layer, site, sae))
    zero, _ = _loss(model, windows, Splice(layer, site, torch.zeros_like))
    return Evaluation(fvu, clean, spliced, zero, n)


def has_output_head(model) -> bool:
    return model.config.head == "lm" and model.config.causal


def new_sae(sample: torch.Tensor, expansion: int, k: int, aux_k: int = 0) -> SparseAutoencoder:
    """An SAE for activations like `sample` (N, C) in model units: its scale makes their mean squared norm C,
    its b_dec starts at their mean (in SAE units)."""
    d = sample.shape[1]
    mean_sq = float((sample.double() ** 2).sum(1).mean())
    if not mean_sq > 0:
        raise SAEError("The activations are zero on this text: there is nothing to reconstruct.")
    sae = SparseAutoencoder(d, expansion * d, k, math.sqrt(d / mean_sq), aux_k)
    sae.b_dec.data = (sample.float() * sae.scale).mean(0)
    return sae


@dataclass
class Fitted:
    steps: int  # steps done
    dead_share: float  # latents dead at the end
    loss: float  # the last step's normalised MSE (per dimension, SAE units)


def fit(sae: SparseAutoencoder, batch: Callable[[int], torch.Tensor], steps: int, batch_size: int, lr: float,
        progress: Progress | None = None, should_stop: Callable[[], bool] | None = None,
        every: tuple[int, Callable[[], None]] | None = None) -> Fitted:
    """Adam on the TopK reconstruction loss plus AuxK for dead latents; `batch(n)`: n rows in model units.
    The rate is constant, then decays linearly over the last 20% of the steps. `every`: (n, f) calls f every
    n steps (the buffer's refresh)."""
    d, width = sae.d_model, sae.width
    optimizer = torch.optim.Adam(sae.parameters(), lr=lr)
    last_fired = torch.zeros(width, dtype=torch.long)
    decay_from = int(steps * 0.8)
    step, loss_value = 0, float("nan")
    sae.train()
    for step in range(1, steps + 1):
        if every is not None and step % every[0] == 0:
            every[1]()
        x = batch(batch_size) * sae.scale
        pre = sae.pre_activations(x)
        top = pre.topk(sae.k, dim=-1)
        z = torch.zeros_like(pre).scatter_(-1, top.indices, F.relu(top.values))
        error = x - sae.decode(z)
        loss = (error ** 2).sum(-1).mean() / d
        loss_value = float(loss.detach())
        last_fired[top.indices[top.values > 0].unique()] = step
        dead = (step - last_fired) > DEAD_STEPS
        if dead.any():  # AuxK: the dead latents' top pre-activations reconstruct what the live ones missed
            aux = pre.masked_fill(~dead, float("-inf")).topk(min(sae.aux_k, int(dead.sum())), dim=-1)
            z_aux = torch.zeros_like(pre).scatter_(-1, aux.indices, F.relu(aux.values))
            e = error.detach()
            aux_loss = ((e - z_aux @ sae.W_dec) ** 2).sum(-1).mean() / (e ** 2).sum(-1).mean().clamp_min(1e-12)
            loss = loss + AUX_WEIGHT * aux_loss
        tail = (steps - step + 1) / (steps - decay_from + 1)
        for group in optimizer.param_groups:
            group["lr"] = lr * (1.0 if step <= decay_from else tail)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        sae.drop_parallel_gradient()
        optimizer.step()
        sae.normalise_decoder()
        if progress is not None and (step % 20 == 0 or step == steps):
            progress("train", step, steps)
        if should_stop is not None and should_stop():
            break
    sae.eval()
    return Fitted(step, float(((step - last_fired) > DEAD_STEPS).float().mean()), loss_value)


def train_sae(loaded, settings: SAESettings, text: str | None = None, progress: Progress | None = None,
              should_stop: Callable[[], bool] | None = None) -> tuple[SparseAutoencoder, dict[str, Any], dict]:
    """Train an SAE on `loaded`'s site; (sae, its metadata, its feature tables). `should_stop()`: ends training
    after the step in progress (the SAE so far is evaluated and kept)."""
    model = loaded.model.eval()
    if not Path(loaded.path).is_file():
        raise SAEError("SAEs are trained for the lab's own checkpoint files (.safetensors); this model is a folder.")
    check_site(model, settings.layer, settings.site)
    corpus = model_text(loaded, text)
    started = time.perf_counter()
    cpu_started = time.process_time()
    torch.manual_seed(settings.seed)
    if progress is not None:
        progress("read", 0, 1)
    buffer = ActivationBuffer(model, corpus.train, settings.layer, settings.site, settings.buffer_rows,
                              settings.seed)
    d = model.config.n_embd
    try:
        sae = new_sae(buffer.data, settings.expansion, settings.k, settings.aux_k)
    except SAEError:
        raise SAEError(f"The {SITE_LABELS[settings.site]} {settings.layer} is zero on this text: there is "
                       "nothing to reconstruct.") from None
    width, scale = sae.width, sae.scale
    per_pass = max(1, buffer.rows // settings.batch_size)
    fitted = fit(sae, buffer.batch, settings.steps, settings.batch_size, settings.lr, progress, should_stop,
                 every=(per_pass, lambda: buffer.refresh(settings.refresh)))
    step = fitted.steps
    sae.eval()
    train_seconds = time.perf_counter() - started
    if progress is not None:
        progress("evaluate", 0, 1)
    result = evaluate(model, sae, corpus.held_out, settings.layer, settings.site)
    if progress is not None:
        progress("features", 0, 1)
    tables = feature_tables(model, sae, corpus.train, settings.layer, settings.site, settings.seed)
    dead_share = fitted.dead_share
    meta = {
        "format": FORMAT, "model_file": Path(loaded.path).name, "model_sha256": file_sha256(loaded.path),
        "layer": settings.layer, "site": settings.site, "kind": "topk", "k": settings.k, "aux_k": sae.aux_k,
        "width": width, "expansion": settings.expansion, "d_model": d, "scale": scale,
        "fvu": result.fvu, "losses": {"model": result.model_loss, "spliced": result.spliced_loss,
                                      "zero_ablated": result.zero_loss, "recovered": result.recovered,
                                      "pieces": result.pieces},
        "steps": step, "steps_asked": settings.steps, "stopped": step < settings.steps, "seed": settings.seed,
        "settings": asdict(settings), "dead_share": dead_share, "text": corpus.source, "notes": corpus.notes,
        "windows_read": buffer.windows_read, "train_seconds": train_seconds,
        "cpu_seconds": time.process_time() - cpu_started, "wall_seconds": time.perf_counter() - started,
        "output_head": has_output_head(model), "final_scale": tables.pop("final_scale"),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": "",  # the command line sets it
    }
    return sae, meta, tables


# ---------------------------------------------------------------------------------------------- features


@torch.no_grad()
def feature_tables(model, sae: SparseAutoencoder, windows: list[list[int]], layer: int, site: str,
                   seed: int = 0) -> dict:
    """Densities and top contexts over up to STATS_WINDOWS windows of the text (seeded choice): tensors
    `density` (F,), `top_values` (F, n), `top_ids` (F, n, W) int32 (-1: no piece), `top_acts` (F, n, W),
    `top_focus` (F, n) int32 (the top piece's place in its context); and `final_scale` (the mean divisor of the
    final LayerNorm over these pieces, for the logit effects)."""
    rng = np.random.default_rng(seed + 1)
    chosen = sorted(rng.permutation(len(windows))[:STATS_WINDOWS].tolist())
    ids_parts, idx_parts, val_parts, window_of, place_of, scales = [], [], [], [], [], []
    for number, i in enumerate(chosen):
        record = trace(model, windows[i], activations=True)
        x = torch.from_numpy(site_activations(record, layer, site)) * sae.scale
        z = sae.encode(x)
        top = z.topk(sae.k, dim=-1)
        idx_parts.append(top.indices.to(torch.int32))
        val_parts.append(top.values)
        ids_parts.extend(windows[i])
        window_of.extend([number] * len(windows[i]))
        place_of.extend(range(len(windows[i])))
        if record.activations.final_scale is not None:
            scales.append(record.activations.final_scale)
    idx = torch.cat(idx_parts).numpy()  # (P, k)
    val = torch.cat(val_parts).numpy()  # (P, k)
    ids = np.asarray(ids_parts, dtype=np.int64)
    window_of, place_of = np.asarray(window_of), np.asarray(place_of)
    n_pos, width = len(ids), sae.width
    active = val > 0
    density = np.bincount(idx[active], minlength=width) / max(n_pos, 1)
    # each feature's top contexts: sort (feature, -value) over every active entry, keep the first n per feature
    flat_f, flat_v = idx[active], val[active]
    flat_p = np.nonzero(active)[0]
    order = np.lexsort((-flat_v, flat_f))
    flat_f, flat_v, flat_p = flat_f[order], flat_v[order], flat_p[order]
    starts = np.searchsorted(flat_f, np.arange(width))
    rank = np.arange(len(flat_f)) - starts[flat_f]
    keep = rank < TOP_CONTEXTS
    top_values = np.zeros((width, TOP_CONTEXTS), np.float32)
    top_pos = np.full((width, TOP_CONTEXTS), -1, np.int64)
    top_values[flat_f[keep], rank[keep]] = flat_v[keep]
    top_pos[flat_f[keep], rank[keep]] = flat_p[keep]
    offsets = np.arange(-BEFORE, AFTER + 1)
    where = top_pos[..., None] + offsets  # (F, n, W)
    valid = (top_pos[..., None] >= 0) & (where >= 0) & (where < n_pos)
    safe = np.clip(where, 0, max(n_pos - 1, 0))
    centre = np.clip(top_pos, 0, max(n_pos - 1, 0))[..., None]
    valid &= window_of[safe] == window_of[centre]  # a context stays inside the window the model read
    top_ids = np.where(valid, ids[safe], -1).astype(np.int32)
    feature = np.arange(width)[:, None, None]
    acts = ((idx[safe] == feature[..., None]) * val[safe]).sum(-1)  # (F, n, W): this feature's activation
    top_acts = np.where(valid, acts, 0.0).astype(np.float32)
    final_scale = float(np.concatenate(scales).mean()) if scales else float("nan")
    return {"density": torch.from_numpy(density.astype(np.float32)), "top_values": torch.from_numpy(top_values),
            "top_ids": torch.from_numpy(top_ids), "top_acts": torch.from_numpy(top_acts).half(),
            "top_focus": torch.full((width, TOP_CONTEXTS), BEFORE, dtype=torch.int32), "final_scale": final_scale,
            "stats_pieces": n_pos}


# ---------------------------------------------------------------------------------------------- the file


def sae_path(checkpoint: str | Path, layer: int, site: str) -> Path:
    checkpoint = Path(checkpoint)
    return checkpoint.with_name(f"{checkpoint.name.removesuffix('.safetensors')}.sae-L{layer}-{site}.safetensors")


def saes_beside(checkpoint: str | Path) -> list[Path]:
    """The SAE files beside a checkpoint (any layer, any site), in name order."""
    checkpoint = Path(checkpoint)
    stem = checkpoint.name.removesuffix(".safetensors")
    return sorted(checkpoint.parent.glob(f"{stem}.sae-L*-*.safetensors"))


TENSORS = ("W_enc", "b_enc", "W_dec", "b_dec")
TABLES = ("density", "top_values", "top_ids", "top_acts", "top_focus")


def save_sae(path: str | Path, sae: SparseAutoencoder, meta: dict, tables: dict) -> Path:
    from core.io.checkpoint import write_atomically

    path = Path(path)
    tensors = {name: getattr(sae, name).detach().cpu().contiguous() for name in TENSORS}
    tensors.update({name: tables[name].contiguous() for name in TABLES})
    meta = {**meta, "stats_pieces": tables.get("stats_pieces", meta.get("stats_pieces"))}
    write_atomically(path, tensors, {"format": FORMAT, "sae": json.dumps(meta, allow_nan=True)})
    return path


@dataclass
class LoadedSAE:
    sae: SparseAutoencoder
    meta: dict
    tables: dict[str, torch.Tensor]
    path: Path

    @property
    def layer(self) -> int:
        return int(self.meta["layer"])

    @property
    def site(self) -> str:
        return str(self.meta["site"])


def read_sae_meta(path: str | Path) -> dict:
    from safetensors import safe_open

    path = Path(path)
    try:
        with safe_open(str(path), framework="pt", device="cpu") as fh:
            raw = fh.metadata() or {}
    except Exception:  # noqa: BLE001 - a damaged or foreign file: one sentence
        raise SAEError(f"{path.name} is not a readable safetensors file.") from None
    if raw.get("format") != FORMAT:
        raise SAEError(f"{path.name} is not an Attention Lab SAE file.")
    try:
        return json.loads(raw["sae"])
    except (KeyError, ValueError):
        raise SAEError(f"{path.name} has unreadable SAE metadata.") from None


def load_sae(path: str | Path, checkpoint: str | Path | None = None, model_sha256: str | None = None) -> LoadedSAE:
    """Read an SAE file; with `checkpoint` (or its sha256 given), refuse one made for other weights."""
    from safetensors.torch import load_file

    path = Path(path)
    meta = read_sae_meta(path)
    if checkpoint is not None or model_sha256 is not None:
        digest = model_sha256 or file_sha256(checkpoint)
        if digest != meta.get("model_sha256"):
            model = Path(checkpoint).name if checkpoint else "this model"
            raise SAEError(f"{path.name} was trained on other weights than {model} (their sha256 differs): train it "
                           "again for this model.")
    tensors = load_file(str(path))
    sae = SparseAutoencoder(int(meta["d_model"]), int(meta["width"]), int(meta["k"]), float(meta["scale"]),
                            int(meta.get("aux_k", 0)))
    sae.load_state_dict({name: tensors[name] for name in TENSORS})
    sae.eval()
    return LoadedSAE(sae, meta, {name: tensors[name] for name in TABLES if name in tensors}, path)


# ---------------------------------------------------------------------------------------------- one feature


@dataclass
class Context:
    pieces: list[str]
    activations: list[float]
    focus: int  # the top piece's index in `pieces`
    value: float


@dataclass
class Feature:
    number: int
    density: float
    contexts: list[Context]
    raised: list[tuple[str, float]]  # (piece, logit change per unit of activation), largest first
    lowered: list[tuple[str, float]]  # most negative first
    note: str = ""  # why there are no logit effects, when there are none

    def to_json(self) -> dict:
        return asdict(self)


def logit_effects(model, direction: torch.Tensor, final_scale: float) -> torch.Tensor | None:
    """(V,) the direct effect on the logits of adding `direction` (C,) to the residual stream: through the final
    LayerNorm with its divisor frozen at `final_scale` (centred, times its gain) and the unembedding; None for a
    model without an output head."""
    if not has_output_head(model):
        return None
    ln, unembed = model.readout()
    d = direction.double()
    d = d - d.mean()
    if ln.weight is not None:
        d = d * ln.weight.detach().double()
    return (unembed.detach().double() @ d / final_scale).float()


def feature(loaded, sae_file: LoadedSAE, number: int, top: int = 10) -> Feature:
    """One feature's page: density, top contexts, the pieces it raises and lowers (a lookup and one product)."""
    from core.lens.attention import piece_label

    width = sae_file.sae.width
    if not 0 <= number < width:
        raise SAEError(f"This SAE has features 0 to {width - 1}; there is no feature {number}.")
    tables, tokenizer = sae_file.tables, loaded.tokenizer
    ids, acts = tables["top_ids"][number], tables["top_acts"][number].float()
    values, focus = tables["top_values"][number], tables["top_focus"][number]
    labels: dict[int, str] = {}

    def label(i: int) -> str:
        if i not in labels:
            labels[i] = piece_label(tokenizer, i)
        return labels[i]

    contexts = []
    for row in range(ids.shape[0]):
        if float(values[row]) <= 0:
            continue
        keep = [j for j in range(ids.shape[1]) if int(ids[row, j]) >= 0]
        if not keep:
            continue
        contexts.append(Context([label(int(ids[row, j])) for j in keep], [float(acts[row, j]) for j in keep],
                                keep.index(int(focus[row])) if int(focus[row]) in keep else 0, float(values[row])))
    effects = logit_effects(loaded.model, sae_file.sae.direction(number), float(sae_file.meta.get("final_scale", 1.0)))
    raised, lowered, note = [], [], ""
    if effects is None:
        note = "This model has no output head that predicts pieces, so a feature's effect on the logits is not shown."
    else:
        order = torch.argsort(effects, descending=True)
        raised = [(label(int(i)), float(effects[i])) for i in order[:top]]
        lowered = [(label(int(i)), float(effects[i])) for i in order.flip(0)[:top]]
    return Feature(number, float(tables["density"][number]), contexts, raised, lowered, note)


def features_by_density(sae_file: LoadedSAE) -> list[int]:
    """Feature numbers, densest first (dead ones last)."""
    return torch.argsort(sae_file.tables["density"], descending=True, stable=True).tolist()


# ---------------------------------------------------------------------------------------------- steering


@dataclass
class Steering:
    prompt: str
    plain_text: str  # the continuation without steering
    steered_text: str  # with it
    pieces: list[str]  # the next-piece candidates shown (top of either distribution)
    plain_probs: list[float]
    steered_probs: list[float]


@torch.no_grad()
def _continue(model, ids: list[int], hooks: Hooks | None, new: int) -> tuple[list[int], torch.Tensor]:
    """Greedy continuation of `ids` by `new` pieces with `hooks` in every pass (the model's own cached forward);
    also the next-piece probabilities after the prompt."""
    from core.model.attention import KVCache

    device = model_device(model)
    context = window_length(model)
    ids = ids[-context:]
    caches = [KVCache() for _ in model.blocks]
    h, _ = model.hidden_states(torch.tensor([ids], device=device), caches=caches, hooks=hooks)
    first = F.softmax(model.head.unembed(h[:, -1]).float(), dim=-1)[0]
    out = list(ids)
    logits = model.head.unembed(h[:, -1])
    for _ in range(new):
        next_id = int(logits.argmax(-1))
        out.append(next_id)
        if len(out) >= context:
            break
        h, _ = model.hidden_states(torch.tensor([[next_id]], device=device), start=len(out) - 1, caches=caches,
                                   hooks=hooks)
        logits = model.head.unembed(h[:, -1])
    return out[len(ids):], first


def steer(loaded, sae_file: LoadedSAE, number: int, scale: float, prompt: str, new: int = 24,
          top: int = 10) -> Steering:
    """Generate after `prompt` with and without scale x the feature's decoder direction (model units: one unit
    is the feature firing at activation 1) added to the residual stream leaving the SAE's layer."""
    from core.lens.attention import piece_label

    model = loaded.model
    if not (has_output_head(model)):
        raise SAEError("Steering needs a left-to-right language model; this model does not generate text.")
    if not 0 <= number < sae_file.sae.width:
        raise SAEError(f"This SAE has features 0 to {sae_file.sae.width - 1}; there is no feature {number}.")
    ids = loaded.tokenizer.tokenize(prompt).ids
    if not ids:
        raise SAEError("Type a prompt: there is nothing to continue.")
    vector = scale * sae_file.sae.direction(number).to(model_device(model))
    plain, p_plain = _continue(model, ids, None, new)
    steered, p_steered = _continue(model, ids, Steer(sae_file.layer, vector), new)
    shown = torch.unique(torch.cat([p_plain.topk(top).indices, p_steered.topk(top).indices]))
    shown = shown[torch.argsort(p_steered[shown], descending=True)]
    return Steering(prompt, loaded.tokenizer.decode(plain), loaded.tokenizer.decode(steered),
                    [piece_label(loaded.tokenizer, int(i)) for i in shown], p_plain[shown].tolist(),
                    p_steered[shown].tolist())


def summary_sentence(meta: dict) -> str:
    """One computed sentence: reconstruction and the loss with the SAE spliced in against the model's own."""
    where = f"{SITE_LABELS[meta['site']]} {meta['layer']}"
    head = (f"A TopK SAE of {meta['width']:,} features (k = {meta['k']}) on the {where} leaves "
            f"{meta['fvu']:.1%} of its variance unexplained on held-out text")
    losses = meta.get("losses") or {}
    if not meta.get("output_head", True) or not math.isfinite(losses.get("model", float("nan"))):
        return head + "; this model has no output head, so no loss with it spliced in is measured."
    change = losses["spliced"] / losses["model"] - 1
    return (head + f"; spliced in, the model's loss is {losses['spliced']:.3f} nats per piece against its own "
            f"{losses['model']:.3f} ({change:+.1%}) and {losses['zero_ablated']:.3f} with the site zeroed "
            f"({losses['recovered']:.0%} of that gap recovered).")


# ---------------------------------------------------------------------------------------------- command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m core.lens.sae", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train an SAE on one layer of a checkpoint, saved beside it")
    t.add_argument("checkpoint")
    t.add_argument("--layer", type=int, required=True)
    t.add_argument("--site", choices=SITES, default="resid")
    t.add_argument("--expansion", type=int, default=8)
    t.add_argument("--k", type=int, default=SAESettings.k)
    t.add_argument("--steps", type=int, default=SAESettings.steps)
    t.add_argument("--batch-size", type=int, default=SAESettings.batch_size)
    t.add_argument("--lr", type=float, default=SAESettings.lr)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--text", help="a UTF-8 text file to train on instead of the model's recorded training text")
    t.add_argument("--out", help="where to write the SAE (default: beside the checkpoint)")
    t.add_argument("--progress", help="a file to write progress lines to (JSON per line), for the page")
    t.add_argument("--threads", type=int, default=1)
    s = sub.add_parser("show", help="one feature of a saved SAE")
    s.add_argument("sae_file")
    s.add_argument("--feature", type=int, required=True)
    s.add_argument("--checkpoint", help="the model (default: the file the SAE names, beside it)")
    s.add_argument("--json", action="store_true")
    return parser


class StopWhenAsked:
    def __init__(self) -> None:
        self.asked = False

    def ask(self, _signum=None, _frame=None) -> None:
        self.asked = True

    def __call__(self) -> bool:
        return self.asked


def _train(args) -> int:
    import signal

    from core.data.datasets import DataError, read_text
    from core.io.checkpoint import CheckpointError, load

    torch.set_num_threads(max(1, args.threads))
    try:
        loaded = load(args.checkpoint)
        text = read_text(args.text) if args.text else None
    except (CheckpointError, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    progress_file = open(args.progress, "a", encoding="utf-8") if args.progress else None  # noqa: SIM115

    def progress(stage: str, done: int, total: int) -> None:
        if progress_file is not None:
            progress_file.write(json.dumps({"stage": stage, "done": done, "total": total}) + "\n")
            progress_file.flush()
        if stage == "train" and (done % 200 == 0 or done == total):
            print(f"step {done}/{total}", file=sys.stderr)

    stopper = StopWhenAsked()
    signal.signal(signal.SIGTERM, stopper.ask)
    settings = SAESettings(layer=args.layer, site=args.site, expansion=args.expansion, k=args.k, steps=args.steps,
                           batch_size=args.batch_size, lr=args.lr, seed=args.seed)
    try:
        sae, meta, tables = train_sae(loaded, settings, text, progress, stopper)
    except SAEError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    meta["command"] = "python -m core.lens.sae " + " ".join(sys.argv[1:] if args.argv is None else args.argv)
    out = Path(args.out) if args.out else sae_path(loaded.path, args.layer, args.site)
    save_sae(out, sae, meta, tables)
    if progress_file is not None:
        progress_file.write(json.dumps({"stage": "done", "done": 1, "total": 1, "path": str(out)}) + "\n")
        progress_file.close()
    print(summary_sentence(meta))
    print(f"wrote {out} ({meta['steps']} steps, {meta['cpu_seconds']:.1f} CPU s, dead {meta['dead_share']:.1%})")
    return 0


def _show(args) -> int:
    from core.io.checkpoint import CheckpointError, load

    try:
        meta = read_sae_meta(args.sae_file)
        checkpoint = Path(args.checkpoint) if args.checkpoint else Path(args.sae_file).with_name(meta["model_file"])
        loaded = load(checkpoint)
        sae_file = load_sae(args.sae_file, checkpoint)
        shown = feature(loaded, sae_file, args.feature)
    except (SAEError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(shown.to_json(), ensure_ascii=False, allow_nan=True))
        return 0
    print(f"feature {shown.number}: density {shown.density:.3%}")
    for c in shown.contexts:
        print(f"  {c.value:7.3f}  " + "".join(p if i != c.focus else f"[{p}]" for i, p in enumerate(c.pieces)))
    if shown.note:
        print(shown.note)
    else:
        print("  raises: " + ", ".join(f"{p!r} {v:+.2f}" for p, v in shown.raised))
        print("  lowers: " + ", ".join(f"{p!r} {v:+.2f}" for p, v in shown.lowered))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = argv
    return _train(args) if args.command == "train" else _show(args)


if __name__ == "__main__":
    raise SystemExit(main())
