"""Birthplace probe: what a finetuned model retrieves from pretraining, and what it makes up.

Looking only at an answer you cannot tell a retrieved birthplace from an invented one. These modules put
instruments next to the assignment-exact evaluation of `core.lens.probe.evaluation` (which owns the decoding,
the answer rule and accuracy); import the one you need (`from core.lens.probe import corpus`):

- questions: a typed name or question -> 'Where was NAME born?' and NAME; unknown characters, in one
  sentence; uploaded question files and predictions in the assignment's format;
- corpus: the world folder's files (`ProbeData`), the documents about a name and the places they
  mention (`CorpusIndex`, `Evidence`), one evidence category per prediction;
- answers: one question put to a model (`ask`: greedy answer, confidence, every known place ranked by
  log P(place + ⁇ | question + ⁇), teacher forced and batched) and where it looks as it starts to answer;
- analysis: the dev set, question by question (`DevAnalysis` = a `BirthplaceResult` + evidence), models
  compared, filters, reliability;
- fabricated: names nobody wrote about, and the fallback strategy they reveal.

No streamlit here: the page (`pages/probe.py`) caches and draws what these functions return.
"""
