"""The curves page's comparison caption is computed from the final values it compares."""

import pandas as pd

from core.lens.history.presets import COMPARISONS, ComparisonPreset, comparison_verdicts


def _frame(values: dict[str, float], metric: str = "accuracy") -> pd.DataFrame:
    rows = []
    for run, final in values.items():
        for step, value in ((10, 0.1), (20, final)):
            rows.append({"run": run, "step": step, "epoch": step // 10, "tokens": step, "wall_time": 0.0,
                         "split": "val", "metric": metric, "value": value})
    return pd.DataFrame(rows)


PRESET = COMPARISONS["pretrained vs from scratch"]


def test_a_gain_is_stated_with_both_numbers():
    lines = comparison_verdicts(PRESET, _frame({"names-pretrained": 0.60, "names-scratch": 0.51}))
    assert lines == ["names-pretrained ends at 60.0% validation accuracy, names-scratch at 51.0%: "
                     "+9.0 points (better with it)."]


def test_no_difference_is_said_when_the_numbers_show_none():
    frame = _frame({"names-pretrained": 0.513, "names-scratch": 0.517, "birth-vanilla-pretrained": 0.048,
                    "birth-vanilla-scratch": 0.048})
    lines = comparison_verdicts(PRESET, frame) + comparison_verdicts(
        COMPARISONS["pretrained vs from scratch (birthplace)"], frame)
    assert len(lines) == 2
    assert "-0.4 points" in lines[0] and "no clear difference" in lines[0]
    assert "+0.0 points" in lines[1] and "no clear difference" in lines[1]


def test_a_loss_is_better_when_lower_and_missing_runs_say_nothing():
    preset = ComparisonPreset(("a", "b"), "loss", "two runs", pairs=(("a", "b"), ("a", "c")))
    lines = comparison_verdicts(preset, _frame({"a": 1.0, "b": 2.0}, metric="loss"))
    assert lines == ["a ends at 1 validation loss, b at 2: -1 (better with it)."]


def test_preset_stories_state_no_result():
    for preset in COMPARISONS.values():
        assert not any(word in preset.story.lower() for word in ("higher", "better", "lower", "helps", "lets"))


def test_the_difference_adds_up_with_the_rounded_values_shown():
    (line,) = comparison_verdicts(PRESET, _frame({"names-pretrained": 0.51333, "names-scratch": 0.51667}))
    assert "51.3%" in line and "51.7%" in line and "-0.4 points" in line
