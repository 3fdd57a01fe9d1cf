"""The head-role figures (core.figures.heads), read through fig.data."""

from __future__ import annotations

import numpy as np

from core.figures.heads import head_roles_figure, phase_change_figure
from core.lens.heads import ROLES


def _scores(value: float) -> dict[str, np.ndarray]:
    return {role: np.full((2, 4), value) + np.arange(8).reshape(2, 4) / 100 for role in ROLES}


def test_one_layers_by_heads_map_per_role():
    scores = _scores(0.1)
    fig = head_roles_figure(scores)
    assert [t.meta["role"] for t in fig.data] == list(ROLES)
    for trace, role in zip(fig.data, ROLES):
        np.testing.assert_allclose(np.asarray(trace.z), scores[role])
        assert list(trace.y) == ["L0", "L1"] and list(trace.x) == ["H0", "H1", "H2", "H3"]
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == 1


def test_the_roles_across_training_share_the_loss_curve_step_axis():
    history = [(0, _scores(0.05)), (500, _scores(0.5)), (1500, _scores(0.9))]
    fig = phase_change_figure([0, 10, 20], [4.0, 3.0, 1.0], history, change_step=10, run="induction")
    loss, *roles = fig.data
    assert list(loss.x) == [0, 10, 20] and loss.meta["kind"] == "loss"
    assert len(roles) == len(ROLES) * 2  # one line per role and layer
    first = roles[0]
    assert list(first.x) == [0, 500, 1500]
    assert first.y[2] == np.asarray(history[2][1][first.meta["role"]]).max(axis=1)[0]
    # [run, step, layer, the layer's best head at that step]: _scores makes head 3 the best of every layer
    assert [list(c) for c in first.customdata] == [["induction", 0, 0, 3], ["induction", 500, 0, 3],
                                                   ["induction", 1500, 0, 3]]
    assert [list(c)[2:] for c in roles[1].customdata] == [[1, 3]] * 3
    assert roles[0].xaxis == loss.xaxis.replace("x", "x2") or roles[0].xaxis == "x2"


def test_a_click_on_a_layers_best_head_opens_that_layer_and_head(monkeypatch):
    """Issue 63: the point "induction, best head of layer 1" opened Attention on layer 0, head 0."""
    import ui.phase_change_panel as panel

    scores = [(0, {r: np.zeros((2, 2)) for r in ROLES}), (400, {r: np.zeros((2, 2)) for r in ROLES})]
    scores[1][1]["induction"][1, 1] = 0.9  # at step 400 layer 1's best induction head is H1
    fig = phase_change_figure([0, 400], [4.0, 1.0], scores, run="induction")
    number = next(i for i, t in enumerate(fig.data) if t.name == "induction L1")
    opened = []
    monkeypatch.setattr(panel, "open_attention_at", lambda *args: opened.append(args))
    point = {"curve_number": number, "point_index": 1, "customdata": list(fig.data[number].customdata[1])}
    panel.open_clicked_role_step({"selection": {"points": [point]}}, fig)
    assert opened == [("induction", 400, 1, 1)]


def test_the_loss_line_wears_no_roles_colour():
    """Issue 63: the loss and "previous-token L0" were one blue."""
    history = [(0, _scores(0.05)), (1500, _scores(0.9))]
    loss, *roles = phase_change_figure([0, 10, 20], [4.0, 3.0, 1.0], history, run="induction").data
    assert loss.line.color not in {r.line.color for r in roles}
