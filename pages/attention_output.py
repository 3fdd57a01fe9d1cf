"""The attention page's secondary parts, under the figure: what the model made of the text (its answer,
label or next tokens) and the sanity checks of the run. Not a page (app.py lists pages explicitly)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.lens import attention as av
from core.lens.outputs import ModelOutput
from pages.tables import fitted_columns


def show_output(output: ModelOutput) -> None:
    st.subheader(output.title)
    if output.note:
        st.info(output.note)
    if output.completion is not None:
        st.text("Answer: " + (output.answer if output.answer else "(empty)"))
        st.code(output.shown_completion, language=None, wrap_lines=True)  # 32 characters ran off the right at 1024 px
    if output.rows:  # widths that add up to the page: a piece-level model's top-5 table scrolled at 1024 px
        table = pd.DataFrame(output.rows)
        st.dataframe(table, hide_index=True, column_config=fitted_columns(table))


def show_sanity(run: av.AttentionRun) -> None:
    checks = av.sanity_checks(run)
    failed = [c.name for c in checks if c.passed is False]
    if failed:
        st.error("Sanity check failed: " + "; ".join(failed) + ".")
    with st.expander("Sanity checks", expanded=bool(failed)):
        # st.table wraps the details inside the column; a data grid scrolled them sideways at 1024 px
        st.table(pd.DataFrame([{"check": c.name, "result": {True: "pass", False: "FAIL", None: "n/a"}[c.passed],
                                "detail": c.detail} for c in checks]).set_index("check"))
