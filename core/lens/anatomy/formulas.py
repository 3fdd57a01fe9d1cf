"""Parameter formulas: which closed form each module gets, and how a model splits into rows (Parts).

Every row carries the formula a student would write by hand, e.g. `4·(C² + C)` for vanilla attention.
The formula is stored as arithmetic over named symbols and evaluated by a tiny safe evaluator, so the
text on screen is exactly the expression that tests compare with the count.

Which formula a module gets comes from registries keyed by module class (looked up along the class's
MRO, so every positional scheme without parameters shares one entry); containers are walked, so any
model built from registered parts (ours, the PyTorch tutorial model) gets a table without new code.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from torch import nn

from core.lens.anatomy.references import TutorialPositionalEncoding, TutorialTransformer
from core.model.attention import SynthesizerAttention, VanillaAttention
from core.model.positional import LearnedPositions, PositionalScheme
from core.model.transformer import Block, ClassifierHead, LMHead

# --- formulas ------------------------------------------------------------------------------------

SYMBOLS = {
    "V": "vocabulary size",
    "C": "model width (n_embd, d_model)",
    "T": "block size (longest sequence)",
    "h": "attention heads",
    "F": "feed-forward width",
    "K": "classes",
    "I": "input features of a linear layer",
    "O": "output features of a linear layer",
}

_OPERATORS: dict[type, Callable] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}


def evaluate(expression: str, symbols: dict[str, int]) -> Fraction:
    """Exact value of + - * / ** over integers and the given symbols; anything else is refused."""

    def walk(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return Fraction(node.value)
        if isinstance(node, ast.Name) and node.id in symbols:
            return Fraction(symbols[node.id])
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        raise ValueError(f"Not a parameter formula: {expression!r}.")

    return walk(ast.parse(expression, mode="eval"))


@dataclass(frozen=True)
class Formula:
    expression: str  # Python arithmetic over symbols, e.g. "4*(C**2 + C)"
    symbols: dict[str, int] = field(default_factory=dict)
    note: str = ""  # why, where the count is not obvious (e.g. "a buffer, not learned")

    @property
    def value(self) -> int:
        result = evaluate(self.expression, self.symbols)
        if result.denominator != 1:  # e.g. C/h with h not dividing C: not a real model
            raise ValueError(f"{self.text} is not a whole number for {self.where}.")
        return int(result)

    @property
    def text(self) -> str:
        """How the course writes it: 4*(C**2 + C) -> 4·(C² + C)."""
        return self.expression.replace("**2", "²").replace("**3", "³").replace("*", "·")

    @property
    def where(self) -> str:
        return ", ".join(f"{name}={value:,}" for name, value in self.symbols.items())


# Role of a part in the model: the table's "part" column and the bar chart's groups.
ROLES = ("embeddings", "positional", "attention", "feed-forward", "norm", "head", "other")

FormulaRule = Callable[[nn.Module], tuple[str, Formula]]


def _embedding(m: nn.Embedding) -> tuple[str, Formula]:
    return "embeddings", Formula("V*C", {"V": m.num_embeddings, "C": m.embedding_dim})


def _no_parameters(m: nn.Module) -> tuple[str, Formula]:
    return "positional", Formula("0", note="computed from the position: nothing to learn")


def _learned_positions(m: LearnedPositions) -> tuple[str, Formula]:
    rows, width = m.table.shape
    return "positional", Formula("T*C", {"T": rows, "C": width}, "one learned vector per position")


def _vanilla_attention(m: VanillaAttention) -> tuple[str, Formula]:
    if m.key.bias is None:  # nanoGPT's bias=False
        return "attention", Formula("4*C**2", {"C": m.key.in_features}, "key, query, value, proj; no biases")
    return "attention", Formula("4*(C**2 + C)", {"C": m.key.in_features}, "key, query, value, proj")


def _synthesizer(m: SynthesizerAttention) -> tuple[str, Formula]:
    symbols = {"C": m.w1.in_features, "h": m.n_head, "T": m.w2.size(1) + 1}
    return "attention", Formula("C**2 + C + (C/h)*(T-1) + (T-1) + 2*(C**2 + C)", symbols,
                                "w1; w2 (C/h × T−1) and b2 per key position; value, proj")


def _layer_norm(m: nn.LayerNorm) -> tuple[str, Formula]:
    width = int(np.prod(m.normalized_shape))
    if not m.elementwise_affine:
        return "norm", Formula("0", note="no affine parameters")
    if m.bias is None:  # nanoGPT's bias=False: a gain only
        return "norm", Formula("C", {"C": width}, "gain, no bias")
    return "norm", Formula("2*C", {"C": width}, "gain and bias")


def _lm_head(m: LMHead) -> tuple[str, Formula]:
    return "head", Formula("V*C", {"V": m.unembed.out_features, "C": m.unembed.in_features}, "no bias")


def _classifier_head(m: ClassifierHead) -> tuple[str, Formula]:
    first, last = m.classifier[0], m.classifier[-1]
    return "head", Formula("C**2 + C + C*K + K", {"C": first.in_features, "K": last.out_features},
                           "Linear(C, C), ReLU, Linear(C, K)")


def _multihead_attention(m: nn.MultiheadAttention) -> tuple[str, Formula]:
    expression = "4*(C**2 + C)" if m.in_proj_bias is not None else "4*C**2"
    return "attention", Formula(expression, {"C": m.embed_dim}, "in_proj (3C × C) and out_proj")


def _linear(m: nn.Linear) -> tuple[str, Formula]:
    expression = "I*O + O" if m.bias is not None else "I*O"
    return "other", Formula(expression, {"I": m.in_features, "O": m.out_features})


def _tutorial_positions(m: TutorialPositionalEncoding) -> tuple[str, Formula]:
    return "positional", Formula("0", note="sinusoidal table stored as a buffer: saved, not learned")


FORMULAS: dict[type[nn.Module], FormulaRule] = {
    nn.Embedding: _embedding,
    PositionalScheme: _no_parameters,  # sinusoidal, ALiBi, RoPE, none
    LearnedPositions: _learned_positions,
    TutorialPositionalEncoding: _tutorial_positions,
    VanillaAttention: _vanilla_attention,
    SynthesizerAttention: _synthesizer,
    nn.LayerNorm: _layer_norm,
    LMHead: _lm_head,
    ClassifierHead: _classifier_head,
    nn.MultiheadAttention: _multihead_attention,
    nn.Linear: _linear,
}


def _lookup(registry: dict[type, Callable], module: nn.Module) -> Callable | None:
    for cls in type(module).__mro__:
        if cls in registry:
            return registry[cls]
    return None


# --- parts: how a container splits into rows -----------------------------------------------------

@dataclass
class Part:
    name: str  # dotted module path, e.g. "blocks.0.attn"
    role: str  # one of ROLES
    modules: list[nn.Module]
    formula: Formula


def _feed_forward(name: str, first: nn.Linear, second: nn.Linear, expression: str,
                  symbols: dict[str, int], note: str) -> Part:
    return Part(name, "feed-forward", [first, second], Formula(expression, symbols, note))


def _block_parts(block: Block, prefix: str) -> Iterator[Part]:
    yield from walk(block.ln1, f"{prefix}.ln1")
    yield from walk(block.attn, f"{prefix}.attn")
    if block.mlp is None:  # attention-only (ModelConfig.mlp False): no second LayerNorm, no feed-forward
        return
    yield from walk(block.ln2, f"{prefix}.ln2")
    # minGPT's MLP is C -> 4C -> C: C·4C + 4C + 4C·C + C = 8C² + 5C; another width F (CSE 256's 100):
    # C·F + F + F·C + C.
    first, second = block.mlp[0], block.mlp[2]
    if first.bias is None:  # nanoGPT's bias=False: C·F + F·C
        yield _feed_forward(f"{prefix}.mlp", first, second, "2*C*F", {"C": first.in_features, "F": first.out_features},
                            "Linear(C, F), GELU, Linear(F, C); no biases")
    elif first.out_features == 4 * first.in_features:
        yield _feed_forward(f"{prefix}.mlp", first, second, "8*C**2 + 5*C", {"C": first.in_features},
                            "Linear(C, 4C), GELU, Linear(4C, C)")
    else:
        yield _feed_forward(f"{prefix}.mlp", first, second, "2*C*F + F + C",
                            {"C": first.in_features, "F": first.out_features}, "Linear(C, F), GELU, Linear(F, C)")


def _encoder_layer_parts(layer: nn.TransformerEncoderLayer, prefix: str) -> Iterator[Part]:
    yield from walk(layer.self_attn, f"{prefix}.self_attn")
    first, second = layer.linear1, layer.linear2
    yield _feed_forward(f"{prefix}.linear1+linear2", first, second, "2*C*F + F + C",
                        {"C": first.in_features, "F": first.out_features}, "Linear(C, F), ReLU, Linear(F, C)")
    yield from walk(layer.norm1, f"{prefix}.norm1")
    yield from walk(layer.norm2, f"{prefix}.norm2")


def _tutorial_parts(model: TutorialTransformer, prefix: str) -> Iterator[Part]:
    yield from walk(model.embedding, "embedding")
    yield from walk(model.pos_encoder, "pos_encoder")
    yield from walk(model.transformer_encoder, "transformer_encoder")
    head = model.linear
    symbol = "V" if head.out_features == model.embedding.num_embeddings else "K"
    yield Part("linear", "head", [head],
               Formula(f"C*{symbol} + {symbol}", {"C": head.in_features, symbol: head.out_features},
                       "Linear(C, vocabulary)" if symbol == "V" else "Linear(C, classes)"))


SPLITS: dict[type[nn.Module], Callable[[nn.Module, str], Iterator[Part]]] = {
    Block: _block_parts,
    nn.TransformerEncoderLayer: _encoder_layer_parts,
    TutorialTransformer: _tutorial_parts,
}


def walk(module: nn.Module, prefix: str = "") -> Iterator[Part]:
    """Rows for `module`: a registered split, else a registered formula, else its children."""
    split = _lookup(SPLITS, module)
    if split is not None:
        yield from split(module, prefix)
        return
    rule = _lookup(FORMULAS, module)
    if rule is not None:
        role, formula = rule(module)
        yield Part(prefix, role, [module], formula)
        return
    for name, child in module.named_children():
        yield from walk(child, f"{prefix}.{name}" if prefix else name)
    own = sum(p.numel() for p in module.parameters(recurse=False))
    if own:  # parameters held directly by an unregistered module: counted, no closed form
        yield Part(prefix or "(model)", "other", [], Formula(str(own), note="own parameters; no formula"))
