"""One plain line per epoch on stdout (it survives a pipe, unlike a progress bar), then the final and
the best epoch: EpochReport, a Trainer callback that runs after the Evaluation callback and shows its rows.
"""

from __future__ import annotations

from collections.abc import Callable

from core.train.trainer import Callback, Trainer

Printer = Callable[[str], None]


def _fmt(value: float) -> str:
    return f"{value:.4f}" if abs(value) < 1000 else f"{value:.4g}"


def metric_text(metrics: dict[str, float]) -> str:
    return "  ".join(f"{key.replace('_', ' ', 1)} {_fmt(value)}" for key, value in metrics.items())


class EpochReport(Callback):
    """`unit` names what the trainer's token count counts (tokens for LMs, sentences for classifiers);
    `best` is the metric that picks the best epoch and whether higher is better."""

    def __init__(self, unit: str = "tokens", best: tuple[str, bool] | None = None,
                 out: Printer = print) -> None:
        self.unit, self.best, self.out = unit, best, out
        self.epochs: list[tuple[int, dict[str, float]]] = []
        self._wall = self._tokens = None

    @staticmethod
    def _train_loss(t: Trainer) -> float | None:
        rows = [r["value"] for r in t.history if r["split"] == "train" and r["metric"] == "loss"
                and r["epoch"] == t.epoch - 1]
        return sum(rows) / len(rows) if rows else None

    def on_epoch_end(self, t: Trainer) -> None:
        # the rows recorded since the epoch counter moved on: this epoch's evaluation (the loop's own train
        # rows of the epoch carry the number it started with)
        metrics = {f"{r['split']}_{r['metric']}": r["value"] for r in t.history if r["epoch"] == t.epoch}
        if self._wall is None:  # the first epoch of this process (a resumed run starts mid-way)
            # rows before this epoch: earlier train rows, and the previous epoch's evaluation rows
            # (recorded after the epoch counter moved on, so they carry this epoch's start number)
            done = [r for r in t.history if r["epoch"] < t.epoch - 1
                    or (r["split"] != "train" and r["epoch"] == t.epoch - 1)]
            self._wall = max((r["wall_time"] for r in done), default=0.0)
            self._tokens = max((r["tokens"] for r in done), default=0)
        seconds = max(t.wall_time - self._wall, 1e-9)
        rate = (t.tokens - self._tokens) / seconds
        self._wall, self._tokens = t.wall_time, t.tokens
        loss = self._train_loss(t)
        shown = {**({"train_loss": loss} if loss is not None else {}), **metrics}
        self.epochs.append((t.epoch, dict(shown)))
        self.out(f"epoch {t.epoch}/{t.config.max_epochs}  {metric_text(shown)}  "
                 f"{seconds:.1f} s  {rate:,.0f} {self.unit}/s")

    def summary(self) -> list[str]:
        if not self.epochs:
            return []
        epoch, metrics = self.epochs[-1]
        lines = [f"final (epoch {epoch}): {metric_text(metrics)}"]
        if self.best is not None:
            key, higher = self.best
            scored = [(e, m) for e, m in self.epochs if key in m]
            if scored:
                pick = max if higher else min
                epoch, metrics = pick(scored, key=lambda em: em[1][key])
                lines.append(f"best (epoch {epoch}, by {key.replace('_', ' ', 1)}): {metric_text(metrics)}")
        return lines
