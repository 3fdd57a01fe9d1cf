"""Birthplace probe: what a finetuned model retrieves from pretraining, and what it makes up.

Looking only at an answer you cannot tell a retrieved birthplace from an invented one, so the assignment-exact
evaluation sits here beside the instruments that look behind each answer. Import the module you need
(`from core.lens.probe import corpus`); nothing is re-exported here:

- evaluation: the assignment's decoding (greedy, 32 characters, the answer between the ⁇s), accuracy
  (`BirthplaceResult`), the baselines (most frequent place, the name's country prior) and memorisation;
- questions: a typed name or question -> 'Where was NAME born?' and NAME; unknown characters, in one sentence;
  uploaded question files; predictions in the assignment's format;
- corpus: the world folder's files (`ProbeData`), the documents about a name and the places they
  mention (`CorpusIndex`, `Evidence`), one evidence category per prediction;
- answers: one question put to a model (`ask`: greedy answer, confidence, every known place ranked by
  log P(place + ⁇ | question + ⁇), teacher forced and batched) and where it looks as it starts to answer;
- dev_set: the dev set question by question (`DevAnalysis` = a `BirthplaceResult` + evidence), models
  compared, filters, reliability, evidence categories, and the stored x answered 2x2 (`knowledge_table`);
- fabricated: names nobody wrote about, and the fallback strategy they reveal.

No streamlit here: the page (`pages/probe.py`) caches and draws what these functions return.
"""
