"""bench.run_all reads every benchmark's last line, `RESULT name measured=x target... pass=...`, whichever way the
benchmark writes its target (`target=0`, `target<=1`, `target>=1`, `target==0`, `target=nav<=1.5s,...`): a line it
could not read was reported as a failed benchmark (head_roles, first_visits and others wrote `target<=`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.run_all import from_result_line

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("line", "target"), [
    ("RESULT margins measured=0_pushed_of_56 target=0 pass=true", "0"),
    ("RESULT head_roles measured=0.39 target<=1 pass=true", "<=1"),
    ("RESULT checkpoint_load measured=1.43x target>=1 pass=true", ">=1"),
    ("RESULT load measured=0 target==0 pass=true", "=0"),
    ("RESULT browser_latency measured=0.74s(x) target=nav<=1.5s,tap<=0.5s pass=false", "nav<=1.5s,tap<=0.5s"),
])
def test_every_way_a_benchmark_writes_its_target_is_read(line, target):
    outcome = from_result_line(f"some output\n{line}\n", 0)
    assert outcome is not None and outcome.target == target
    assert outcome.passed == line.endswith("pass=true")


def test_every_benchmarks_result_line_has_a_form_the_runner_reads():
    written = re.compile(r'print\(f?"RESULT (\w+) measured=.*? target')
    forms = re.compile(r'RESULT \S+ measured=\S+ target(=|<=|>=|==)')
    for path in sorted((ROOT / "bench").glob("*.py")):
        for line in path.read_text().splitlines():
            if written.search(line):
                sample = re.sub(r"\{[^}]*\}", "1", line.split('"', 1)[1])
                assert forms.search(sample), f"{path.name}: {line.strip()}"
