"""bench.streamlit_floor's arithmetic and its generated app (the timing itself is a bench, not a test)."""

from __future__ import annotations

from collections import Counter

import pytest
from streamlit.testing.v1 import AppTest

from bench.streamlit_floor import BLOCK, KINDS, floor_app, floor_ms, kind_costs


def test_a_kind_costs_its_page_over_the_empty_page_and_a_container_not_its_markdown():
    costs = kind_costs(5.0, {"markdown": 7.0, "selectbox": 9.0, BLOCK: 10.0}, per_page=20)
    assert costs["markdown"] == pytest.approx(0.1)
    assert costs["selectbox"] == pytest.approx(0.2)
    assert costs[BLOCK] == pytest.approx(0.25 - 0.1)  # each container on its page holds one markdown element


def test_a_run_floor_adds_each_element_to_the_empty_page_and_charges_unknown_kinds_as_markdown():
    costs = {"markdown": 0.1, "plotly_chart": 0.3, BLOCK: 0.05}
    total, unmeasured = floor_ms(Counter({"markdown": 4, "plotly_chart": 2, BLOCK: 6, "audio": 1}), 5.0, costs)
    assert total == pytest.approx(5.0 + 0.4 + 0.6 + 0.3 + 0.1)
    assert unmeasured == {"audio"}


def test_the_floor_app_draws_every_kind_and_each_replica_with_nothing_else(tmp_path):
    script = tmp_path / "floor.py"
    script.write_text(floor_app(3, [{"markdown": 2, "plotly_chart": 1, BLOCK: 2}]))
    at = AppTest.from_file(str(script), default_timeout=60).run()
    assert not at.exception
    assert [t.value for t in at.title] == ["Empty"]
    source = script.read_text()
    for kind in KINDS:
        assert f"{kind!r}: lambda i:" in source
    assert "REPLICAS = [{'markdown': 2, 'plotly_chart': 1, 'container': 2}]" in source
