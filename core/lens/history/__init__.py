"""Training histories as one tidy table, and the numbers the curves page draws from it.

Histories come from two places, both without loading a single tensor: a checkpoint's metadata (the
safetensors header only, key "history") and a trainer's live `<checkpoint>.log.jsonl`, followed as it grows.
Bad input is normal input: malformed records, a truncated last line, NaN/inf values and runs that log
different metrics are counted and described in notes (sentences for the user), never raised. No streamlit.

- records: the table (`COLUMNS`, `LoadedHistory`) and whole histories read into it (checkpoint, .jsonl, upload)
- logs: live training logs (`LogFollower`) and every choosable run (`catalog`)
- curves: smoothing, metric order and direction, per-run summaries, what the chart draws (`build_curves`)
- presets: ready-made comparisons (`COMPARISONS`) and their verdicts

Import the module you need: `from core.lens.history import curves, records`.
"""
