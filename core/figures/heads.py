"""Head roles (core.lens.heads) as figures: a layers x heads map per role, and the roles across training under
the loss (core.lens.phase_change)."""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.figures.common import base_layout, finished, wrap_title

ROLE_COLORS = {"previous-token": "#636EFA", "induction": "#EF553B", "duplicate-token": "#00CC96",
               "first-token": "#AB63FA", "current-token": "#FFA15A"}
# The loss above the roles: the first run colour was the previous-token blue (issue 63), so a reader took the loss for
# a role. Near-black is no role's and no run's colour; the panel's axis says it is the loss.
LOSS_COLOR = "#262730"


@finished
def head_roles_figure(scores: dict[str, np.ndarray], title: str | None = None) -> go.Figure:
    """One heatmap per role, layers (rows, layer 0 on top) x heads (columns), all on one 0-1 scale. Trace order
    is the roles' order; each trace's `meta` names its role."""
    roles = list(scores)
    L, H = next(iter(scores.values())).shape
    fig = make_subplots(rows=1, cols=len(roles), horizontal_spacing=0.03,
                        subplot_titles=[r.split("-")[0] for r in roles])
    for k, role in enumerate(roles):
        z = np.asarray(scores[role], dtype=float)
        fig.add_trace(go.Heatmap(
            z=z, x=[f"H{h}" for h in range(H)], y=[f"L{layer}" for layer in range(L)], coloraxis="coloraxis",
            hovertemplate=f"{role}<br>%{{y}} %{{x}}: %{{z:.3f}}<extra></extra>", meta={"role": role}),
            row=1, col=k + 1)
        fig.update_yaxes(autorange="reversed", showticklabels=k == 0, row=1, col=k + 1)
    base_layout(fig, wrap_title(html.escape(title), 60) if title else None, 150 + 28 * L)
    lines = fig.layout.title.text.count("<br>") + 1 if title else 0
    fig.update_layout(coloraxis=dict(colorscale="Blues", cmin=0.0, cmax=1.0,
                                     colorbar=dict(thickness=12, title=dict(text="score"))),
                      margin=dict(t=45 + 25 * lines), height=150 + 28 * L + 25 * lines)  # room for the role names
    return fig


@finished
def phase_change_figure(loss_steps, losses, history: list[tuple[int, dict[str, np.ndarray]]],
                        change_step: int | None = None, run: str = "", title: str | None = None) -> go.Figure:
    """Two panels on one x axis (training step): the loss (top), and each role's best score per layer at every
    kept step (bottom, one line per role and layer: solid for layer 0, dashed, dotted... after it). A dotted
    vertical line marks the phase change. The kept-step points carry `customdata` [run, step, layer, head] (the
    layer's best head at that step) and `meta={"kind": "roles", "run": run, "role": role}` (a click opens the
    Attention page at that step, layer and head)."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.45, 0.55])
    fig.add_trace(go.Scatter(x=list(loss_steps), y=[float(v) for v in losses], mode="lines", name="loss",
                             line=dict(color=LOSS_COLOR, width=2), meta={"kind": "loss"},
                             hovertemplate="step %{x}: loss %{y:.3f}<extra></extra>"), row=1, col=1)
    steps = [s for s, _ in history]
    dashes = ("solid", "dash", "dot", "dashdot", "longdash")
    if history:
        for role in history[0][1]:
            best = np.stack([np.asarray(scores[role]).max(axis=1) for _, scores in history])  # (steps, L)
            which = np.stack([np.asarray(scores[role]).argmax(axis=1) for _, scores in history])  # its head
            for layer in range(best.shape[1]):
                fig.add_trace(go.Scatter(
                    x=steps, y=best[:, layer].tolist(), mode="lines+markers", name=f"{role} L{layer}",
                    line=dict(color=ROLE_COLORS.get(role, "#7F7F7F"), dash=dashes[layer % len(dashes)]),
                    customdata=[[run, s, layer, int(which[i, layer])] for i, s in enumerate(steps)],
                    meta={"kind": "roles", "run": run, "role": role},
                    hovertemplate=f"{role}, best head of layer {layer} (H%{{customdata[3]}})<br>step %{{x}}: "
                                  "%{y:.2f}<extra></extra>"),
                    row=2, col=1)
    if change_step is not None:
        fig.add_vline(x=change_step, line=dict(color="#555", dash="dot", width=1))
    fig.update_yaxes(title="loss", row=1, col=1)
    fig.update_yaxes(title="best score", range=[0, 1.02], row=2, col=1)
    fig.update_xaxes(title="training step", row=2, col=1)
    base_layout(fig, html.escape(title) if title else None, 520)
    fig.update_layout(hovermode="closest", clickmode="event+select")
    return fig
