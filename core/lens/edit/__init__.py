"""Edit what a model knows: change one birthplace and measure what else changed (ROME's question).

Import the module you need; nothing is re-exported here:

- methods: the rank-one edit (ROME), finetuning with a norm constraint (FT-L) and MEMIT, each returning a
  `WeightDelta`; the site (layer, position class) and the refusals (`EditError`);
- key_statistics: the second moment of each MLP's keys over the pretraining corpus, kept beside the checkpoint;
- weights: `WeightDelta` (apply, undo bitwise) and `EditedModel` (a session's own copy of a model);
- scorecard: CounterFact's metrics on this task (efficacy, generalisation, specificity in three groups, the
  rest of the person), each answer a `predict_birthplaces` answer of the edited model;
- cli: `python -m core.lens.edit CHECKPOINT --random N --seed S`.

No streamlit here.
"""
