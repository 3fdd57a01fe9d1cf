"""Where an answer comes from: logit lens, direct attribution, causal tracing, input attribution (one question:
`analyses`), their averages over a question file kept beside the checkpoint (`dev_set`) and the command line
(`cli`: `python -m core.lens.where_from CHECKPOINT --questions FILE`). The page and the command share these."""

from core.lens.where_from.analyses import (
    CORRUPTIONS,
    IG_STEPS,
    KINDS,
    METRICS,
    NOISE,
    POSITION_CLASSES,
    SAMPLES,
    SEED,
    Attribution,
    CausalTrace,
    InputAttribution,
    LogitLens,
    Question,
    WhereFromError,
    causal_trace,
    direct_attribution,
    impossible_cells,
    input_attribution,
    logit_lens,
    patchable,
    read_question,
    record,
)

__all__ = ["CORRUPTIONS", "IG_STEPS", "KINDS", "METRICS", "NOISE", "POSITION_CLASSES", "SAMPLES", "SEED",
           "Attribution", "CausalTrace", "InputAttribution", "LogitLens", "Question", "WhereFromError",
           "causal_trace", "direct_attribution", "impossible_cells", "input_attribution", "logit_lens",
           "patchable", "read_question", "record"]
