"""The model layer: config, tokenizers, attention kinds, positional schemes, the transformer.

Importing the package imports every registry, so `ModelConfig` is always checked against all of them.
"""

from core.model import attention, positional, transformer  # noqa: F401  (registers the choices)
