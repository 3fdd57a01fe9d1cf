"""Tables out as CSV that a spreadsheet opens safely: a text cell starting like a formula ('=', '+', '-',
'@', tab, carriage return) gets a leading quote, so it is shown, never run (OWASP's CSV injection)."""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # spreadsheet formula injection (OWASP)


def csv_safe(value):
    """A text cell a spreadsheet would run as a formula, with a leading quote; anything else as it is."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def table_csv(frame: pd.DataFrame) -> str:
    """CSV of a table; text cells that a spreadsheet would run as a formula get a leading quote."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([str(c) for c in frame.columns])
    for row in frame.itertuples(index=False):
        writer.writerow([csv_safe(v) for v in row])
    return buffer.getvalue()
