"""One colour per run and per scheme everywhere: a positional variant wears its scheme's colour on the
curves page too, and no other run of a chart takes that colour."""

from __future__ import annotations

from core.figures.common import RUN_COLORS, run_colors
from core.figures.curves import family_run_colors, training_curves_figure
from core.io.checkpoint import list_checkpoints
from core.lens.history.curves import build_curves
from core.lens.history.records import combine, read_checkpoint_history
from core.model.positional import POSITIONAL


def test_fixed_colours_win_and_the_others_keep_clear_of_them():
    names = [f"run-{i}" for i in range(12)]
    free = run_colors(names)
    taken = free["run-3"]  # a colour some other run would have had
    colors = run_colors(names, {"run-0": taken, "not-on-this-chart": RUN_COLORS[5]})
    assert colors["run-0"] == taken and "not-on-this-chart" not in colors
    assert len(set(colors.values())) == len(names)  # never two runs in one colour
    assert RUN_COLORS[5] not in colors.values()  # a colour fixed for a run elsewhere is nobody else's
    assert run_colors(names, {}) == free  # nothing fixed: exactly the hash colours


def test_the_bundled_positional_family_wears_the_scheme_colours():
    infos = list_checkpoints()
    fixed = family_run_colors(infos)
    for scheme in ("learned", "sinusoidal", "alibi", "rope"):
        assert fixed[f"lm-{scheme}"] == POSITIONAL[scheme].color
    assert "names-pretrained" not in fixed and "birth-vanilla-pretrained" not in fixed


def test_the_curves_chart_draws_lm_alibi_in_the_alibi_colour():
    infos = list_checkpoints()
    runs = ["lm-alibi", "lm-rope", "names-pretrained"]
    frame = combine([read_checkpoint_history(i.path, i.name) for i in infos if i.name in runs]).frame
    plot = build_curves(frame, runs, "loss", "step", 0.0, False)
    fig = training_curves_figure(plot, fixed_colors=family_run_colors(infos))
    colour = {t.legendgroup: t.line.color for t in fig.data if t.legendgroup and t.line.color}
    assert colour["lm-alibi"] == POSITIONAL["alibi"].color and colour["lm-rope"] == POSITIONAL["rope"].color
    assert colour["names-pretrained"] not in {POSITIONAL[s].color for s in ("alibi", "rope")}
