"""Where an answer comes from, one module per analysis of one question (`question`: the question as the model
reads it): the logit lens (`logitlens`), direct attribution (`attribution`), causal tracing (`tracing`) and input
attribution (`saliency`); their averages over a question file kept beside the checkpoint (`dev_set`) and the
command line (`cli`: `python -m core.lens.where_from CHECKPOINT --questions FILE`). Everything starts from one
`Trace` with activations (core.lens.trace) and patches the model only through its hook points
(core.model.hooks): no second implementation of the model. The page and the command share these."""

from core.lens.where_from.attribution import Attribution, direct_attribution
from core.lens.where_from.logitlens import LogitLens, logit_lens
from core.lens.where_from.question import Question, WhereFromError, patchable, read_prompt, read_question, record
from core.lens.where_from.saliency import IG_STEPS, InputAttribution, input_attribution
from core.lens.where_from.tracing import (
    CORRUPTIONS,
    KINDS,
    METRICS,
    NOISE,
    POSITION_CLASSES,
    SAMPLES,
    SEED,
    CausalTrace,
    causal_trace,
    impossible_cells,
)

__all__ = ["CORRUPTIONS", "IG_STEPS", "KINDS", "METRICS", "NOISE", "POSITION_CLASSES", "SAMPLES", "SEED",
           "Attribution", "CausalTrace", "InputAttribution", "LogitLens", "Question", "WhereFromError",
           "causal_trace", "direct_attribution", "impossible_cells", "input_attribution", "logit_lens",
           "patchable", "read_prompt", "read_question", "record"]
