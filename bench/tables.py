"""Tables as the browser gets them (issue 45): what a table costs the server per run, handed to st.dataframe as a
pandas frame or a list of records (Streamlit converts it to Arrow on every run) against the Arrow table kept by
ui.browser_tables (only serialised), each in the same run, with the ratio.

    python -m bench.tables [--repeats 200] [--checkpoints DIR]

Rows (milliseconds per call to the Arrow bytes sent, the best of 5 rounds of --repeats calls; the bundled
checkpoints):
- Home's checkpoint list, every run: the records to a DataFrame to Arrow, against `records_table` (a cache hit);
- Anatomy's parameter table (lm-learned), every run: the cached frame to Arrow, against the kept table;
- the Attention page's output table (top-5 next pieces of a 20-token sentence) and its column widths, once per
  new sentence: a DataFrame of the records converted, against `columns_table` (its layout met before);
- the Attention page's sanity checks, once per new sentence: the frame built from records with set_index and
  converted, against `columns_table`.

Each pair is checked to send the same bytes (and widths) before it is timed. Ends with `RESULT tables
measured=<geometric mean of the ratios> target>=1 ...` (bench/run_all.py's form).
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SENTENCE = "Daniel Dunn was an American actor, born in Baltimore."


def best_ms(call, repeats: int) -> float:
    return min(timeit.repeat(call, number=repeats, repeat=5)) / repeats * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tables", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--checkpoints", type=Path, default=ROOT / "checkpoints")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # st.cache_resource outside a Streamlit run warns on every call

    import pandas as pd
    from streamlit import dataframe_util as du

    import ui.attention_views as views
    from core.io.checkpoint import list_checkpoints, load
    from core.lens import attention as av
    from core.lens.anatomy import table as anatomy
    from ui.browser_tables import arrow_table, records_table
    from ui.display import fitted_columns

    infos = list_checkpoints(str(args.checkpoints))
    loaded = load(str(args.checkpoints / "lm-learned.safetensors"))
    if not infos or loaded is None:
        print(f"no checkpoints in {args.checkpoints}", file=sys.stderr)
        return 1
    rows = [{"name": i.name, "task": i.task or "", "attention": i.config.get("attention", ""),
             "positional": i.config.get("positional", ""), "status": i.error or "ok"} for i in infos]
    parts = pd.DataFrame([{  # pages/anatomy.py's parts_frame
        "module": r.module, "parameters": r.parameters, "formula = count": "✓" if r.matches else "✗",
        "formula": r.formula, "part": r.role, "formula value": r.formula_value, "where": r.where,
        "buffers": r.buffers, "note": r.note} for r in anatomy.parameter_table(loaded.model)]).fillna("")
    run = av.run_attention(loaded.model, loaded.tokenizer, loaded.task, SENTENCE, loaded.labels)

    def sanity_before():  # ui/attention_views.py's _sanity before this change
        checks = av.sanity_checks(run)
        return du.convert_pandas_df_to_arrow_table(pd.DataFrame(
            [{"check": c.name, "result": {True: "pass", False: "FAIL", None: "n/a"}[c.passed], "detail": c.detail}
             for c in checks]).set_index("check"))

    pairs = [
        ("Home: checkpoint list, per run", len(rows),
         lambda: du.convert_pandas_df_to_arrow_table(du.convert_anything_to_pandas_df(rows, ensure_copy=False)),
         lambda: records_table(rows)),
        ("Anatomy: parameter table, per run", len(parts),
         lambda: du.convert_pandas_df_to_arrow_table(parts), lambda: arrow_table(parts)),
        ("Attention: output table and widths, per new sentence", len(run.output.rows),
         lambda: (du.convert_pandas_df_to_arrow_table(frame := pd.DataFrame(run.output.rows)), fitted_columns(frame)),
         lambda: views._output_table(run.output)),
        ("Attention: sanity checks, per new sentence", 3,
         sanity_before, lambda: views._sanity(run)[1]),
    ]
    print(f"checkpoints {args.checkpoints}; best of 5 rounds of {args.repeats} calls; ms per call")
    print(f"{'table':52s} {'rows':>5s} {'before':>9s} {'after':>9s} {'ratio':>7s}")

    def sent(result) -> tuple:  # the Arrow bytes sent (and the widths, where a pair gives them)
        table, *widths = result if isinstance(result, tuple) else (result,)
        return du.convert_arrow_table_to_arrow_bytes(table), widths

    ratios = []
    for label, n, before, after in pairs:
        if sent(before()) != sent(after()):
            print(f"{label}: the two paths send different bytes", file=sys.stderr)
            return 1
        old = best_ms(lambda before=before: sent(before()), args.repeats)
        new = best_ms(lambda after=after: sent(after()), args.repeats)
        ratios.append(old / new)
        print(f"{label:52s} {n:5d} {old:9.3f} {new:9.3f} {old / new:6.2f}x")

    measured = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"RESULT tables measured={measured:.2f} target>=1 pass={'true' if measured >= 1 else 'false'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
