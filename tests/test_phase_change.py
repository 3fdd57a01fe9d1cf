"""The phase change (core.lens.phase_change) on synthetic curves, the induction data, and even snapshot spacing."""

from __future__ import annotations

import numpy as np
import torch

from core.data.datasets import RepeatedSegmentDataset
from core.lens.heads import HeadRoles
from core.lens.phase_change import PhaseChange, compared_steps, phase_change, phase_sentence, risen_heads, risen_later
from core.train.snapshots import linear_spaced_steps


def _sigmoid_curve(centre: float, steps: np.ndarray, high=3.0, low=0.5, width=20.0) -> np.ndarray:
    return low + (high - low) / (1 + np.exp((steps - centre) / width))


def test_the_steepest_drop_of_a_synthetic_curve_is_found():
    steps = np.arange(0, 1500, 10)
    rng = np.random.default_rng(0)
    losses = _sigmoid_curve(620, steps) + rng.normal(0, 0.03, len(steps))
    change = phase_change(steps, losses)
    assert abs(change.step - 620) <= 20
    assert change.start < 620 < change.end and change.end - change.start < 300
    assert change.loss_before > 2.5 and change.loss_after < 0.8


def test_a_loss_that_never_falls_has_no_phase_change():
    assert phase_change([0, 10, 20, 30], [1.0, 1.1, 1.2, 1.3]) is None
    assert phase_change([0, 10], [2.0, 1.0]) is None
    assert "never falls" in phase_sentence(None, [])


def test_the_sentence_names_the_heads_that_rose_across_the_change():
    steps = np.arange(0, 1500, 10)
    change = phase_change(steps, _sigmoid_curve(620, steps))
    before = {"induction": np.array([[0.05, 0.05], [0.1, 0.3]]), "previous-token": np.array([[0.07, 0.1], [0, 0]])}
    after = {"induction": np.array([[0.05, 0.05], [0.1, 0.9]]), "previous-token": np.array([[0.35, 0.1], [0, 0]])}
    history = [(0, HeadRoles(before)), (500, HeadRoles(before)), (1000, HeadRoles(after)), (1500, HeadRoles(after))]
    risen = risen_heads(history, change)
    assert [(r[0], r[1], r[2]) for r in risen] == [("induction", 1, 1), ("previous-token", 0, 0)]
    sentence = phase_sentence(change, risen, [s for s, _ in history])
    assert f"step {change.step:,}" in sentence
    assert "induction L1H1 0.30 -> 0.90" in sentence and "previous-token L0H0 0.07 -> 0.35" in sentence
    both = [("induction", 1, 1, 0.3, 0.9), ("induction", 1, 0, 0.1, 0.6), ("previous-token", 0, 0, 0.07, 0.35)]
    assert "induction L1H1 0.30 -> 0.90 (and 1 more head of layer 1)" in phase_sentence(change, both)


def test_a_head_that_rises_after_the_fall_is_not_said_to_rise_across_it():
    """Issue 63: the bundled run kept steps 0, 262, 338 and 1,500 and its loss falls from step 125 to 525; the
    previous-token head rose between 338 and 1,500, the induction head by 338. The sentence compares 0 with 338 and
    names the later rise as later."""
    change = PhaseChange(step=288, start=125, end=525, loss_before=3.77, loss_after=0.54)
    flat = np.zeros((2, 2))

    def roles(induction: float, previous: float) -> HeadRoles:
        i, p = flat.copy(), flat.copy()
        i[1, 0], p[0, 0] = induction, previous
        return HeadRoles({"induction": i, "previous-token": p})

    history = [(0, roles(0.06, 0.04)), (262, roles(0.42, 0.03)), (338, roles(0.64, 0.07)), (1500, roles(0.86, 0.60))]
    assert compared_steps([s for s, _ in history], change) == (0, 338)
    risen, later = risen_heads(history, change), risen_later(history, change)
    assert [(r[0], r[1], r[2]) for r in risen] == [("induction", 1, 0)]
    # 0.07 -> 0.60, and the induction head went on rising (0.64 -> 0.86): both true, the larger first
    assert [(r[0], r[1], r[2]) for r in later] == [("previous-token", 0, 0), ("induction", 1, 0)]
    sentence = phase_sentence(change, risen, [s for s, _ in history], later)
    across, _, after = sentence.partition("; later")
    assert "between the kept steps 0 and 338 the heads that rose are induction L1H0 0.06 -> 0.64" in across
    assert "previous-token" not in across
    assert "(steps 338 to 1,500) previous-token L0H0 0.07 -> 0.60" in after
    # kept steps only outside the fall: the nearest after it, named as such
    sparse = [history[0], history[3]]
    assert compared_steps([0, 1500], change) == (0, 1500)
    assert "between the kept steps 0 and 1,500" in phase_sentence(change, risen_heads(sparse, change), [0, 1500])


def test_the_induction_data_repeats_a_segment_of_varying_length_and_place():
    data = RepeatedSegmentDataset(block_size=32, size=200, segment=(6, 12), seed=0)
    lengths, starts = set(), set()
    for index in range(200):
        ids, start, n = data.row(index)
        assert ids[start:start + n] == ids[start + n:start + 2 * n]
        lengths.add(n)
        starts.add(start)
        x, y = data[index]
        targets = torch.nonzero(y).flatten().tolist()
        assert targets == list(range(start + n, start + 2 * n - 1))  # the predictable repeated tokens only
        assert all(y[t] == ids[t + 1] for t in targets) and x.tolist() == ids[:-1]
    assert lengths == set(range(6, 13)) and len(starts) > 15
    data.set_epoch(1)
    assert data.row(0) != RepeatedSegmentDataset(32, 200, (6, 12), seed=0).row(0), "fresh rows every epoch"


def test_even_snapshot_spacing_leaves_the_final_step_to_the_checkpoint():
    assert linear_spaced_steps(3, 1500) == [0, 500, 1000]
    assert linear_spaced_steps(4, 3) == [0, 1, 2]
    assert linear_spaced_steps(0, 100) == []


def test_loss_driven_snapshots_fall_where_the_loss_falls():
    from core.train.snapshots import SnapshotKeeper

    keeper = SnapshotKeeper(3, "float16", 500, spacing="loss")
    losses = [4.0] * 100 + list(np.linspace(4.0, 0.4, 201)) + [0.4] * 200  # flat, a fall over steps 100-300, flat
    wanted = [step for step, loss in enumerate(losses) if keeper.wants(step, loss)]
    assert wanted[0] == 0 and len(wanted) == 3
    assert all(100 < step < 300 for step in wanted[1:]), wanted  # inside the fall (the average lags ~20 steps)
    assert keeper.plan == wanted


def test_the_induction_window_is_the_shortest_in_which_issue_54s_numbers_hold():
    from core.train.bundle import induction_met, induction_window

    kept = list(range(0, 1501, 25))
    steps = np.array(kept)
    loss = _sigmoid_curve(300, steps, high=3.8, low=0.3, width=40)
    induction = list(0.05 + 0.8 / (1 + np.exp(-(steps - 330) / 40)))  # lags the loss a little
    previous = list(0.02 + 0.3 / (1 + np.exp(-(steps - 450) / 60)))
    a, b = induction_window(1500, steps, loss, kept, induction, previous, steepest=300)
    i, j = kept.index(a), kept.index(b)
    assert b - a <= 300 and a <= 300 <= b
    assert np.interp(a, steps, loss) >= 2.0 and np.interp(b, steps, loss) <= 0.8
    assert induction[i] < 0.4 and induction[j] >= 0.8 and previous[j] >= 2 * previous[i]
    for c in kept:  # no shorter window does it all
        for d in kept:
            if 0 < d - c < b - a and c <= 300 <= d:
                k, m = kept.index(c), kept.index(d)
                assert not (np.interp(c, steps, loss) >= 2.0 and np.interp(d, steps, loss) <= 0.8
                            and induction[k] < 0.4 and induction[m] >= 0.8 and previous[m] >= 2 * previous[k])
    m = dict(steps=1500, start=a, end=b, loss=[3.0, 0.5], induction_l1=[induction[i], induction[j]],
             previous_l0=[previous[i], previous[j]])
    assert induction_met(m) and not induction_met({**m, "end": a + 301})
    # a score that never reaches 0.8: the window where it rose most, and the numbers missed
    low = [0.7 * v for v in induction]
    a, b = induction_window(1500, steps, loss, kept, low, previous, steepest=300)
    assert not induction_met({**m, "start": a, "end": b, "induction_l1": [low[kept.index(a)], low[kept.index(b)]]})
    # a loss that does not fall far enough: no window at all
    assert induction_window(1500, steps, loss + 1.0, kept, induction, previous, steepest=300) is None
