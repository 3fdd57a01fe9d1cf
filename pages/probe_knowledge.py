"""The Dev set tab's "stored versus extractable" section (pages/probe_dev.py calls it): per model, a 2x2 of
dev people, memorised by its pretrained file x answered after finetuning, and the people in one cell.

Not a page (app.py lists pages explicitly). Memorisation is cached per (pretrained file, modification time,
question-file hash, corpus files)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.figures import probe as viz
from core.io.checkpoint import CheckpointError
from core.lens.probe import dev_set
from core.lens.probe.evaluation import memorized
from core.text import markdown_escape as plain
from pages.display import EXPANDER_WIDTH, fitted_columns, show_figure
from pages.model_loading import load_cached
from pages.probe_example import Probe


@st.cache_data(show_spinner="Asking each pretrained model to complete the dev people's documents…",
               max_entries=32)
def cached_memorised(path: str, modified: float, content_hash: str, stamp: tuple, _pairs,
                     _corpus: str) -> list[bool | None]:
    loaded = load_cached(path, modified)
    return memorized(loaded.model, loaded.tokenizer, _corpus, _pairs)


def pretrained_file(loaded) -> Path | None:
    """The file a finetuned model was pretrained as (metadata `pretrained_from`), beside it; None if none."""
    name = loaded.metadata.get("pretrained_from") or ""
    path = Path(loaded.path).parent / Path(str(name)).name
    return path if name and path.is_file() else None


def knowledge_section(p: Probe, analyses: dict, pairs, digest: str) -> None:
    corpus_text = "\n".join(p.data.index.documents)
    tables, skipped = {}, []
    for model, loaded in p.models.items():
        source = pretrained_file(loaded)
        flags = None
        if source is not None:
            try:
                flags = cached_memorised(str(source), source.stat().st_mtime, digest, p.stamp, pairs, corpus_text)
            except (CheckpointError, OSError):
                flags = None
        if flags is None and loaded.metadata.get("pretrained_from"):
            skipped.append(model)  # pretrained, but its pretrained file is not beside it
            continue
        tables[model] = dev_set.knowledge_table([q for q, _ in pairs], analyses[model].result, flags)
    for model in skipped:
        st.info(plain(f"{model} names its pretrained file {p.models[model].metadata['pretrained_from']}, "
                      "which is not beside it: its row is left out."))
    if not tables:
        return
    show_figure(viz.knowledge_grids({m: t.counts for m, t in tables.items()},
                                    title="Dev people: fact stored by pretraining (rows) x answered after "
                                          "finetuning (columns)"),
                "stored-vs-extractable", key="probe_dev_knowledge")
    for model, table in tables.items():
        counts = table.counts
        if not table.pretrained:
            st.text(f"{model}: not pretrained, so it stored nothing; it answers {counts['answered'].sum()} of "
                    f"{len(table.people)} people from the name alone.")
            continue
        stored = int(counts.loc["memorised"].sum())
        st.text(f"{model}: its pretrained file completes {stored} of {len(table.people)} people's own documents "
                f"with the birthplace; finetuning answers {counts.at['memorised', 'answered']} of those "
                f"{stored}, and {counts.at['not memorised', 'answered']} people without the stored fact.")
    model_box, cell_box = st.columns([2, 3])
    model = model_box.selectbox("Model", list(tables), key="probe_dev_knowledge_model")
    cells = list(dev_set.CELLS)
    counts = tables[model].counts
    stored, answered = cell_box.selectbox(
        "People in", cells, key="probe_dev_knowledge_cell",
        format_func=lambda c: f"{c[0]} x {c[1]} ({counts.at[c]}): {dev_set.CELLS[c]}")
    people = tables[model].cell(stored, answered)
    st.dataframe(people, hide_index=True, column_config=fitted_columns(people, EXPANDER_WIDTH))
