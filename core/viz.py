"""Compatibility shim: the figures now live in `core.figures`, one module per page family.

Only pages and tests this branch does not own still import `core.viz` (probe, curves, pages.common,
their tests); once they import from `core.figures` this file goes. Nothing new belongs here.
"""

from core.figures.common import (  # noqa: F401
    ALLOWED_COLOR,
    RUN_COLORS,
    chart_config,
    run_color,
)
from core.figures.curves import SPLIT_DASH, training_curves_figure  # noqa: F401
from core.figures.probe import (  # noqa: F401
    PROBE_CATEGORY_COLORS,
    PROBE_GREEDY_COLOR,
    PROBE_TRAINING_COLOR,
    PROBE_TRUTH_COLOR,
    answer_attention_heatmap,
    candidate_bars,
    category_share_bars,
    confidence_by_category,
    locale_place_heatmap,
    place_share_bars,
    reliability_figure,
)
