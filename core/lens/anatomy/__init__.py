"""Model anatomy: parameters per module with their closed-form formulas, course presets, masks.

- `formulas`: symbols, the safe evaluator, `Formula`, the registries (module class -> formula, container
  -> parts) and `walk`, which turns a model into Parts.
- `table`: `parameter_table` (formula next to the count on the real module; a tensor counted once, a tied head
  as a row sharing the embedding's weights), `totals`, `role_totals`.
- `references`: the PyTorch tutorial model and `COURSE_PRESETS` (built on the meta device).
- `masks`: causal and padding masks and `mask_input` for the anatomy page's heatmaps.
"""
