"""What a run's numbers say: tidy rows (table, CSV, JSON), sentences generated from them, a plain-text
table for the terminal, and the notes on whether the weights give back the dev loss training recorded."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from core.lens.extrapolation.scoring import SPREAD_PARTS, LengthScore, VariantExtrapolation, window_length
from core.model.positional import scheme_label

REPRODUCTION_TOLERANCE = 1e-3  # nats: float noise between batchings is ~1e-6


def recorded_val_loss(metadata: dict[str, Any]) -> float | None:
    """The dev loss training recorded at its end (metrics.val_loss), if any."""
    value = (metadata.get("metrics") or {}).get("val_loss")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def reproduction_note(name: str, recorded: float | None, measured: float,
                      tolerance: float = REPRODUCTION_TOLERANCE) -> str | None:
    """None when the windows protocol at 1x over the whole dev split gives back the loss training recorded
    (it is the same computation); otherwise a sentence saying the numbers are not what training measured."""
    if recorded is None or not math.isfinite(measured) or abs(measured - recorded) <= tolerance:
        return None
    return (f"{name}: its weights give a dev loss of {measured:.4f} at the training length over the whole "
            f"dev split, but training recorded {recorded:.4f}; the code that runs it has changed since it "
            "was trained (or the file was altered), so its numbers here are not what training measured.")


def check_note(name: str, recorded: float | None, measured: float) -> str:
    """The command line's line on the check: the reproduction note, or that the recorded loss came back."""
    problem = reproduction_note(name, recorded, measured)
    if problem:
        return problem
    if recorded is None:
        return "check: no recorded dev loss to compare with."
    return (f"check: the windows protocol at 1x over the whole dev split gives {measured:.4f}, the dev loss "
            "training recorded.")


def variant_labels(variants: Sequence[VariantExtrapolation]) -> list[str]:
    """'ALiBi', 'RoPE', ...; the checkpoint name is added when two variants share a scheme."""
    schemes = [scheme_label(v.positional) for v in variants]
    return [s if schemes.count(s) == 1 else f"{s} ({v.name})" for s, v in zip(schemes, variants)]


def _factor_text(factor: float) -> str:
    return f"{factor:g}x"


SPREAD_COLUMN = f"perplexity ±2 s.e. ({SPREAD_PARTS} parts)"  # LengthScore.spread: how it is computed


def spread_text(score: LengthScore) -> str:
    """'3.41–3.62': the perplexity's range from which predictions were scored; '' where there is none."""
    spread = score.spread()
    return "" if spread is None else f"{spread[0]:.4g}–{spread[1]:.4g}"


def extrapolation_rows(variants: Sequence[VariantExtrapolation]) -> list[dict[str, Any]]:
    """One tidy row per (variant, protocol, length): what the table and the CSV show."""
    rows = []
    for label, v in zip(variant_labels(variants), variants):
        for s in v.scores:
            rows.append({"variant": label, "checkpoint": v.name, "positional": v.positional,
                         "protocol": s.protocol, "factor": s.factor, "length": s.length,
                         "loss": s.loss, "perplexity": s.perplexity, SPREAD_COLUMN: spread_text(s),
                         "tokens scored": s.tokens, "windows": s.windows, "note": s.reason or ""})
    return rows


def extrapolation_summary(variants: Sequence[VariantExtrapolation]) -> list[str]:
    """Sentences generated from the numbers: the perplexities at the longest length anything was measured
    at, which lengths had no number (and why), and the change from the training length. Says nothing
    the numbers do not say."""
    labels = variant_labels(variants)
    sentences = []
    protocols = list(dict.fromkeys(s.protocol for v in variants for s in v.scores))
    for protocol in protocols:
        what = ("sliding window" if protocol == "sliding" else "non-overlapping windows").capitalize()
        factors = sorted({s.factor for v in variants for s in v.scores if s.protocol == protocol
                          and s.applicable})
        if factors:
            longest = factors[-1]
            ok = sorted((s.perplexity, label, s) for label, v in zip(labels, variants)
                        if (s := v.score(protocol, longest)) is not None and s.applicable)
            parts = ", ".join(f"{label} {ppl:.3f}" for ppl, label, _ in ok)
            sentence = (f"{what}, at {_factor_text(longest)} the training length ({ok[0][2].length} tokens), "
                        f"dev perplexity: {parts}")
            sentences.append(sentence + (f"; lowest: {ok[0][1]}." if len(ok) > 1 else "."))
        for label, v in zip(labels, variants):
            missing = [s for s in v.scores if s.protocol == protocol and not s.applicable]
            if missing:
                where = ", ".join(_factor_text(s.factor) for s in missing)
                sentences.append(f"{what}: no number for {label} at {where} ({missing[0].reason}).")
        if factors and 1.0 in factors and factors[-1] > 1.0:
            changes = []
            for label, v in zip(labels, variants):
                base, far = v.score(protocol, 1.0), v.score(protocol, factors[-1])
                if base and far and base.applicable and far.applicable:
                    change = 100 * (far.perplexity / base.perplexity - 1)
                    changes.append(f"{label} {base.perplexity:.3f} -> {far.perplexity:.3f} ({change:+.1f}%)")
            if changes:
                sentences.append(f"{what}, from 1x to {_factor_text(factors[-1])}: "
                                 + "; ".join(changes) + ".")
    return sentences


def format_extrapolation_table(variants: Sequence[VariantExtrapolation], metric: str = "perplexity") -> str:
    """A plain-text table per protocol: rows are variants, columns lengths; 'n/a' is not applicable."""
    labels = variant_labels(variants)
    out = []
    protocols = list(dict.fromkeys(s.protocol for v in variants for s in v.scores))
    for protocol in protocols:
        factors = sorted({s.factor for v in variants for s in v.scores if s.protocol == protocol})
        block = variants[0].block_size
        head = ["variant"] + [f"{_factor_text(f)} ({window_length(block, f)})" for f in factors]
        body = []
        for label, v in zip(labels, variants):
            cells = [label]
            for f in factors:
                s = v.score(protocol, f)
                value = getattr(s, metric) if s is not None else math.nan
                cells.append(f"{value:.4f}" if s is not None and s.applicable else "n/a")
            body.append(cells)
        widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
        out.append(f"{protocol} protocol, dev {metric} by window length (tokens):")
        for row in [head, *body]:
            out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                 for i, (c, w) in enumerate(zip(row, widths))))
        reasons = {f"{label}: {s.reason}" for label, v in zip(labels, variants) for s in v.scores
                   if s.protocol == protocol and not s.applicable}
        out.extend(f"  n/a = {r}" for r in sorted(reasons))
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def json_payload(variants: Sequence[VariantExtrapolation], factors: Sequence[float], protocols: Sequence[str],
                 max_tokens: int | None) -> dict[str, Any]:
    """Every number of a run (and the per-position losses of the windows protocol), for `--json`."""
    return {"factors": list(factors), "protocols": list(protocols), "max_tokens": max_tokens,
            "rows": extrapolation_rows(variants),
            "position_loss": {v.name: {str(s.length): s.position_loss for s in v.scores
                                       if s.position_loss is not None} for v in variants}}
