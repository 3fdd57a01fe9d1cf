"""Training histories as one tidy table, and the numbers the curves page draws from it.

Our own histories come from two places, both without loading a single tensor: a checkpoint's metadata (the
safetensors header only, key "history") and a trainer's live `<checkpoint>.log.jsonl`, followed as it grows.
Bad input is normal input: malformed records, a truncated last line, NaN/inf values and runs that log
different metrics are counted and described in notes (sentences for the user), never raised. No streamlit.

- records: the table (`COLUMNS`, `LoadedHistory`) and whole histories read into it (checkpoint, .jsonl, upload)
- logs: live training logs (`LogFollower`) and every choosable run (`catalog`)
- curves: smoothing, metric order and direction, per-run summaries, what the chart draws (`build_curves`)
- presets: ready-made comparisons (`COMPARISONS`) and their verdicts
- sources: runs other tools wrote (TensorBoard through event_files, Hugging Face Trainer, Lightning/Keras/W&B/plain
  CSV, nanoGPT printouts, MLflow) read into the same table, with their saved steps; `python -m core.lens.history`
  prints them
- event_files: TensorBoard event files through the tensorboard package's own record reader, followed as they grow
- data_server: TensorBoard folders through TensorBoard's own fast loader (tensorboard-data-server, Rust, over
  gRPC on 127.0.0.1): one server per folder per process; sources falls back to event_files where it cannot
- metric_names: other tools' metric names mapped onto (split, metric), the rest kept under their own names
- bands: runs that differ only by seed, as one mean curve with a band

Import the module you need: `from core.lens.history import curves, records`.
"""
