"""Length extrapolation (train short, test long; Press et al. 2022): dev loss of language models at window
lengths that are multiples of the training block size. One home, six parts:

- scoring  the two protocols (windows, sliding), LengthScore / VariantExtrapolation, `score_length`
- devtext  the text a run reads: the validation split training used, from a checkpoint's metadata
- plan     one planner and one runner for the page and the command line (units, work, the check)
- report   rows, sentences and a plain-text table from the numbers; the reproduction notes
- recorded scores stored in a checkpoint's metadata (by `make checkpoints`), read back when text and weights match
- cli      `python -m core.lens.extrapolation extrapolation CHECKPOINT...` and `... record CHECKPOINT...`

The names below are the package's public face; each lives in the module named above.
"""

from core.lens.extrapolation.cli import build_parser, main, parse_factors
from core.lens.extrapolation.devtext import DevText, dev_text_from_metadata, family_dev_text, resolve_data_path
from core.lens.extrapolation.plan import (
    ExtrapolationRun,
    ExtrapolationUnit,
    extrapolation_plan,
    planned_work,
    run_extrapolation,
    text_scorer,
    unit_work,
    work_estimate,
)
from core.lens.extrapolation.recorded import RECORD_KEY, covers, record, recorded_scores
from core.lens.extrapolation.report import (
    REPRODUCTION_TOLERANCE,
    check_note,
    extrapolation_rows,
    extrapolation_summary,
    format_extrapolation_table,
    json_payload,
    recorded_val_loss,
    reproduction_note,
    variant_labels,
)
from core.lens.extrapolation.scoring import (
    DEFAULT_LIMITS,
    EXTRAPOLATION_FACTORS,
    EXTRAPOLATION_PROTOCOLS,
    PROTOCOL_DESCRIPTIONS,
    WINDOWS_PER_BATCH,
    ExtrapolationError,
    LengthScore,
    VariantExtrapolation,
    check_language_model,
    check_protocols,
    score_length,
    token_stream,
    window_length,
)

__all__ = [
    "DEFAULT_LIMITS", "EXTRAPOLATION_FACTORS", "EXTRAPOLATION_PROTOCOLS", "PROTOCOL_DESCRIPTIONS", "RECORD_KEY",
    "REPRODUCTION_TOLERANCE", "WINDOWS_PER_BATCH", "DevText", "ExtrapolationError", "ExtrapolationRun",
    "ExtrapolationUnit", "LengthScore", "VariantExtrapolation", "build_parser", "check_language_model", "check_note",
    "check_protocols", "covers", "dev_text_from_metadata", "extrapolation_plan", "extrapolation_rows",
    "extrapolation_summary", "family_dev_text", "format_extrapolation_table", "json_payload", "main",
    "parse_factors", "planned_work", "record", "recorded_scores", "recorded_val_loss", "reproduction_note",
    "resolve_data_path", "run_extrapolation", "score_length", "text_scorer", "token_stream", "unit_work",
    "variant_labels", "window_length", "work_estimate",
]
