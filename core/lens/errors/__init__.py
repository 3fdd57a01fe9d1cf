"""Error analysis for every model the lab trains: which examples a classifier gets wrong and why, which words
surprise a language model, which birthplaces a birthplace model misses.

One evaluation file in, one result per task out, each a table with one row per example (or per token) and the
numbers every view and caption reads:

- `inputs`: an evaluation file (bytes from the bundled data, an upload or an allowed folder) read the way the
  trainer reads it, or one sentence saying why not;
- `slices`: metrics per slice with Wilson 95% intervals, and calibration (reliability table, expected
  calibration error: the one home of both, also used by the probe's Dev set tab);
- `classify`: `ClassifierErrors` (table, confusion matrix, caption), two classifiers compared, integrated
  gradients for a class, re-prediction of an edited example;
- `lm`: `LanguageModelErrors` (per token: loss, rank of the true piece in GLTR's buckets; per document: loss
  and perplexity), two language models compared token by token and by position in the block;
- `birthplace`: the assignment-exact evaluation with each answer's confidence (`score_birthplaces`, the
  computation the probe's Dev set tab runs) as `BirthplaceErrors`;
- `cli`: `python -m core.lens.errors CHECKPOINT --eval FILE [-o OUT.csv] [--compare CHECKPOINT2] [--tokens]`.

No streamlit here (core never imports it).
"""
