"""The page scripts' own cached functions, defined here once per server process: a page file's body runs on every
rerun, and a function decorated with st.cache_resource / st.cache_data there was wrapped anew each time (Streamlit
reads the function's source to key its cache: 0.2-0.3 ms a function, every rerun of that page; bench/README.md,
issue 45 (fixed)). tests/test_rerun_fixed_cost.py checks that no page file decorates one again.

One section per page; core imports inside the functions (they run on a cache miss only), so importing this module
for one page does not import another page's core modules. Shared objects are read-only, as in ui.shared_caches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import streamlit as st

from ui.shared_caches import by_name

if TYPE_CHECKING:
    import pandas as pd

    from core.lens.anatomy import table
    from core.lens.history.records import LoadedHistory
    from core.lens.probe import answers, corpus

# --- Model anatomy ---------------------------------------------------------------------------------------


@by_name
@st.cache_resource(show_spinner="Building the model on the meta device…")  # shared, read-only
def preset_anatomy(name: str) -> tuple[list[table.PartRow], table.ParameterTotals]:
    from core.lens.anatomy import references, table

    model = references.build_preset(name)  # no memory: shapes only
    return table.parameter_table(model), table.totals(model)


@by_name
@st.cache_resource(show_spinner=False, max_entries=32)  # shared, read-only: counted once per model version
def checkpoint_anatomy(version: tuple, _model) -> tuple[list[table.PartRow], table.ParameterTotals]:
    from core.lens.anatomy import table

    return table.parameter_table(_model), table.totals(_model)


@by_name
@st.cache_resource(show_spinner=False, max_entries=64)  # shared, read-only: st.dataframe only reads it
def parts_frame(source: str, version: tuple | None, _rows: list[table.PartRow]) -> pd.DataFrame:
    """The table's rows, count, check and the whole formula first (at 1024 px they fit side by side); empty
    cells "" rather than "None"."""
    import pandas as pd

    return pd.DataFrame([{
        "module": r.module, "parameters": r.parameters, "formula = count": "✓" if r.matches else "✗",
        "formula": f"{r.formula} (tied)" if r.tied_to else r.formula,  # the caption under the table names to what
        "part": r.role, "formula value": r.formula_value, "where": r.where,
        "buffers": r.buffers, "note": r.note,
    } for r in _rows]).fillna("")


# --- Attention playground ----------------------------------------------------------------------------------

@by_name
@st.cache_resource(show_spinner=False, max_entries=64)  # shared, read-only: the page only reads the samples
def noisy_experiment(n: int, d: int, alpha: float, beta: float, samples: int, seed: int):
    from core.lens import playground as pg

    return pg.noisy_keys_experiment(n, d, alpha, beta, samples, seed)


# --- Training curves ---------------------------------------------------------------------------------------

@by_name
@st.cache_data(show_spinner=False, max_entries=256)
def checkpoint_history(path: str, signature: tuple[int, int], source: str) -> LoadedHistory:
    from core.lens.history.records import read_checkpoint_history

    return read_checkpoint_history(path, source)


@by_name
@st.cache_data(show_spinner=False, max_entries=64)
def seed_history(path: str, signature: tuple[int, int], run: str) -> LoadedHistory:
    """One seed run of a bundled recipe (`<recipe>.seed-histories.json`: histories, no weights)."""
    from core.lens.history.records import read_seed_history

    return read_seed_history(path, run)


@by_name
@st.cache_resource(show_spinner=False, max_entries=32)
def _curves_shared(key: tuple, _compute: Callable):
    return _compute()


def curves_shared(key: tuple | None, what: tuple, compute: Callable):
    """`compute()` once per server for checkpoint runs (`key`: the curves page's checkpoint_runs_key; `what`: the
    rest it depends on), shared read-only by every session (a page switch reads it); computed per run where key
    is None."""
    return compute() if key is None else _curves_shared((key, *what), compute)


# --- Birthplace probe --------------------------------------------------------------------------------------

@by_name
@st.cache_resource(show_spinner="Reading the corpus…", max_entries=4)
def probe_data(folder: str, stamp: tuple[float, ...]) -> corpus.ProbeData:
    from core.lens.probe import corpus

    return corpus.load_probe_data(folder)


@by_name
@st.cache_data(show_spinner=False, max_entries=32)
def cached_people(n: int, locales: tuple[str, ...], seed: int, stamp: tuple, _data) -> list[tuple[str, str]]:
    from core.lens.probe import fabricated

    return fabricated.fabricated_people(n, locales, seed, _data.index, _data.train_names)


@dataclass(frozen=True)
class ExampleAnswers:
    """What one example's answers say by the corpus, beside the models' answers themselves (shared, read-only)."""

    verdicts: dict[str, corpus.Verdict]  # model -> where its answer can come from
    table: pd.DataFrame  # answers.answers_frame: one row per model, with its verdict's label
    evidence: corpus.Evidence  # what the corpus says about the name (and the truth)


@by_name
@st.cache_resource(show_spinner=False, max_entries=256)
def _example_answers(key: str, _index, _name: str, _truth: str | None,
                     _by_model: dict[str, answers.ProbeAnswer]) -> ExampleAnswers:
    from core.lens.probe import answers, corpus

    found = corpus.verdicts(_index, _name, (a.answer for a in _by_model.values()))
    verdicts = {m: found[a.answer] for m, a in _by_model.items()}
    return ExampleAnswers(verdicts, answers.answers_frame(_by_model, _truth, {m: v.label for m, v in verdicts.items()}),
                          _index.evidence(_name, _truth))


def example_answers(models: tuple, question: str, name: str, truth: str | None, world: tuple, index,
                    by_model: dict[str, answers.ProbeAnswer]) -> ExampleAnswers:
    """The verdicts, the answers table and the name's evidence of one example, once per (the models' versions,
    question, name, truth, world: `by_model` and `index` are functions of these) per server: a rerun that changes
    only a view (the candidates' number, the attention view, the focus model) derives nothing again (~9 ms a
    rerun on the bundled corpus, most of it the namesake search). `models`: (name, *model_version) per model."""
    return _example_answers(repr((models, question, name, truth, world)), index, name, truth, by_model)


# --- Representations ----------------------------------------------------------------------------------------


@by_name
@st.cache_data(show_spinner=False, max_entries=16)
def probe_run(path: str, modified: float, source_key: tuple, name: str, _loaded, _source):
    """Keyed on (checkpoint, modification time, the label source: its folder or file digest, label and position);
    the forward passes show a bar (which replays empty on a hit). (ProbeResult, States)."""
    from core.lens import probes

    bar = st.progress(0.0, text="Reading the residual stream…")

    def progress(done: int, total: int) -> None:
        bar.progress(done / total, text=f"Forward passes: {done} of {total} texts")

    try:
        return probes.run_probes(_loaded.model, _loaded.tokenizer, _source, name=name, progress=progress)
    finally:
        bar.empty()
