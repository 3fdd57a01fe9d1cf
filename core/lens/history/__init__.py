"""Training histories as one tidy table, and the numbers the curves page draws from it.

Histories come from two places, both without loading a single tensor:
- a checkpoint's metadata (`read_metadata`: the safetensors header only), key "history";
- a trainer's live `<checkpoint>.log.jsonl` (one record per line), followed as it grows.

Every record becomes one row of `COLUMNS`. Bad input is normal input: malformed records, a
truncated last line (a job mid-write), NaN/inf values and runs that log different metrics are
counted and described in `notes` (sentences for the user), never raised. No streamlit here.

One module per concern. Code in core imports the modules directly; the names below are re-exported
for the curves page, the tests and bench (`from core.lens import history as hist`):
- records: the table (`COLUMNS`, `LoadedHistory`), records and .jsonl lines to rows, `combine`, `to_csv`
- reading: whole histories from a checkpoint header, a .jsonl file or an upload
- logs: live training logs (`LogFollower`, `log_stem`, `is_running`)
- runs: every choosable run by unique name (`catalog`), `file_signature`
- smoothing: `smooth_ema` and `bucket_minmax`, pure numpy
- summary: metric order and direction (`METRIC_GOAL`), final and best values per run
- curves: what the chart draws (`build_curves` -> `CurvePlot`)
- presets: ready-made comparisons (`COMPARISONS`) and `comparison_verdicts`
"""

from core.lens.history.curves import N_BUCKETS, X_AXES, build_curves
from core.lens.history.logs import LIVE_WINDOW_S, LogFollower, is_running, log_stem
from core.lens.history.presets import COMPARISONS, ComparisonPreset, comparison_verdicts, first_epoch_gaps, preset_runs
from core.lens.history.reading import parse_jsonl, read_checkpoint_history, read_uploaded_history
from core.lens.history.records import COLUMNS, LoadedHistory, combine, label_runs, records_frame, to_csv
from core.lens.history.runs import RunSource, catalog, file_signature
from core.lens.history.smoothing import DEFAULT_SMOOTHING, MAX_SMOOTHING, bucket_minmax, default_smoothing, smooth_ema
from core.lens.history.summary import ordered_metrics, summarize_runs

__all__ = [
    "bucket_minmax", "build_curves", "catalog", "COLUMNS", "combine", "comparison_verdicts", "ComparisonPreset",
    "COMPARISONS", "DEFAULT_SMOOTHING", "default_smoothing", "file_signature", "first_epoch_gaps", "is_running",
    "label_runs", "LIVE_WINDOW_S", "LoadedHistory", "log_stem", "LogFollower", "MAX_SMOOTHING", "N_BUCKETS",
    "ordered_metrics", "parse_jsonl", "preset_runs", "read_checkpoint_history", "read_uploaded_history",
    "records_frame", "RunSource", "smooth_ema", "summarize_runs", "to_csv", "X_AXES",
]
