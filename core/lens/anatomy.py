"""Model anatomy: parameters per module with their closed-form formulas, course presets, masks.

Counting is done on real modules (built on the `meta` device for the big presets, which allocates
nothing), and every row carries the formula a student would write by hand, e.g. `4·(C² + C)` for
vanilla attention. The formula is stored as arithmetic over named symbols and evaluated by a tiny
safe evaluator, so the text on screen is exactly the expression that tests compare with the count.

Which formula a module gets comes from registries keyed by module class (looked up along the class's
MRO, so every positional scheme without parameters shares one entry); containers are walked, so any
model built from registered parts (ours, the PyTorch tutorial model) gets a table without new code.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import torch
from torch import nn

from core.model.attention import SynthesizerAttention, VanillaAttention
from core.model.config import PRESETS, ModelConfig
from core.model.positional import LearnedPositions, PositionalScheme
from core.model.tokenizer import PAD_CHAR
from core.model.transformer import Block, ClassifierHead, LMHead, Transformer

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
    return "attention", Formula("4*(C**2 + C)", {"C": m.key.in_features}, "key, query, value, proj")


def _synthesizer(m: SynthesizerAttention) -> tuple[str, Formula]:
    symbols = {"C": m.w1.in_features, "h": m.n_head, "T": m.w2.size(1) + 1}
    return "attention", Formula("C**2 + C + (C/h)*(T-1) + (T-1) + 2*(C**2 + C)", symbols,
                                "w1; w2 (C/h × T−1) and b2 per key position; value, proj")


def _layer_norm(m: nn.LayerNorm) -> tuple[str, Formula]:
    width = int(np.prod(m.normalized_shape))
    if not m.elementwise_affine:
        return "norm", Formula("0", note="no affine parameters")
    return "norm", Formula("2*C" if m.bias is not None else "C", {"C": width}, "gain and bias")


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


FORMULAS: dict[type[nn.Module], FormulaRule] = {
    nn.Embedding: _embedding,
    PositionalScheme: _no_parameters,  # sinusoidal, ALiBi, RoPE, none
    LearnedPositions: _learned_positions,
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
    yield from walk(block.ln2, f"{prefix}.ln2")
    # minGPT's MLP is C -> 4C -> C: C·4C + 4C + 4C·C + C = 8C² + 5C.
    first, second = block.mlp[0], block.mlp[2]
    yield _feed_forward(f"{prefix}.mlp", first, second, "8*C**2 + 5*C", {"C": first.in_features},
                        "Linear(C, 4C), GELU, Linear(4C, C)")


def _encoder_layer_parts(layer: nn.TransformerEncoderLayer, prefix: str) -> Iterator[Part]:
    yield from walk(layer.self_attn, f"{prefix}.self_attn")
    first, second = layer.linear1, layer.linear2
    yield _feed_forward(f"{prefix}.linear1+linear2", first, second, "2*C*F + F + C",
                        {"C": first.in_features, "F": first.out_features}, "Linear(C, F), ReLU, Linear(F, C)")
    yield from walk(layer.norm1, f"{prefix}.norm1")
    yield from walk(layer.norm2, f"{prefix}.norm2")


SPLITS: dict[type[nn.Module], Callable[[nn.Module, str], Iterator[Part]]] = {
    Block: _block_parts,
    nn.TransformerEncoderLayer: _encoder_layer_parts,
}


def _tensor_count(tensors: Sequence[torch.Tensor]) -> int:
    return sum(t.numel() for t in tensors)


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
    own = _tensor_count(list(module.parameters(recurse=False)))
    if own:  # parameters held directly by an unregistered module: counted, no closed form
        yield Part(prefix or "(model)", "other", [], Formula(str(own), note="own parameters; no formula"))


# --- the table -----------------------------------------------------------------------------------

@dataclass
class PartRow:
    module: str
    role: str
    formula: str  # as the course writes it
    where: str  # symbol values
    formula_value: int
    parameters: int  # counted on the module
    trainable: int
    buffers: str  # e.g. "pe (5000×1×200)"; "" when none
    buffer_values: int
    note: str

    @property
    def matches(self) -> bool:
        return self.formula_value == self.parameters


def _buffers(modules: Sequence[nn.Module]) -> list[tuple[str, torch.Tensor]]:
    return [(name, b) for m in modules for name, b in m.named_buffers()]


def parameter_table(model: nn.Module) -> list[PartRow]:
    rows = []
    for part in walk(model):
        params = [p for m in part.modules for p in m.parameters()]
        own = part.formula.value if not part.modules else _tensor_count(params)
        buffers = _buffers(part.modules)
        rows.append(PartRow(
            module=part.name, role=part.role, formula=part.formula.text, where=part.formula.where,
            formula_value=part.formula.value, parameters=own,
            trainable=own if not part.modules else _tensor_count([p for p in params if p.requires_grad]),
            buffers=", ".join(f"{n} ({'×'.join(map(str, b.shape))})" for n, b in buffers),
            buffer_values=_tensor_count([b for _, b in buffers]), note=part.formula.note,
        ))
    return rows


@dataclass
class ParameterTotals:
    total: int
    trainable: int
    non_trainable: int
    buffer_values: int  # numbers stored in buffers (e.g. a sinusoidal table): not parameters


def totals(model: nn.Module) -> ParameterTotals:
    params = list(model.parameters())
    trainable = _tensor_count([p for p in params if p.requires_grad])
    total = _tensor_count(params)
    return ParameterTotals(total, trainable, total - trainable, _tensor_count(list(model.buffers())))


def role_totals(rows: Sequence[PartRow]) -> dict[str, int]:
    """Parameters per role, in ROLES order, roles with no rows left out."""
    sums = {role: 0 for role in ROLES}
    seen = set()
    for row in rows:
        sums[row.role] += row.parameters
        seen.add(row.role)
    return {role: value for role, value in sums.items() if role in seen}


# --- the PyTorch tutorial model ------------------------------------------------------------------

class TutorialPositionalEncoding(nn.Module):
    """The tutorial's sinusoidal table, kept as a buffer: saved with the model, never trained."""

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(x + self.pe[: x.size(0)])  # x: (T, B, C)


class TutorialTransformer(nn.Module):
    """"Language Modeling with nn.Transformer" (PyTorch tutorial): embedding, sinusoidal positions,
    post-norm ReLU `nn.TransformerEncoderLayer`s, a linear head (vocabulary, or n_out classes)."""

    def __init__(self, ntoken: int, d_model: int, nhead: int, d_hid: int, nlayers: int,
                 dropout: float = 0.5, n_out: int | None = None) -> None:
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(ntoken, d_model)
        self.pos_encoder = TutorialPositionalEncoding(d_model, dropout)
        layer = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout)  # post-norm, ReLU
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.linear = nn.Linear(d_model, n_out or ntoken)

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.pos_encoder(self.embedding(src) * math.sqrt(self.d_model))  # (T, B, C)
        return self.linear(self.transformer_encoder(x, src_mask))


def _tutorial_parts(model: TutorialTransformer, prefix: str) -> Iterator[Part]:
    yield from walk(model.embedding, "embedding")
    yield from walk(model.pos_encoder, "pos_encoder")
    yield from walk(model.transformer_encoder, "transformer_encoder")
    head = model.linear
    symbol = "V" if head.out_features == model.embedding.num_embeddings else "K"
    yield Part("linear", "head", [head],
               Formula(f"C*{symbol} + {symbol}", {"C": head.in_features, symbol: head.out_features},
                       "Linear(C, vocabulary)" if symbol == "V" else "Linear(C, classes)"))


def _tutorial_positions(m: TutorialPositionalEncoding) -> tuple[str, Formula]:
    return "positional", Formula("0", note="sinusoidal table stored as a buffer: saved, not learned")


SPLITS[TutorialTransformer] = _tutorial_parts
FORMULAS[TutorialPositionalEncoding] = _tutorial_positions


# --- course presets, built as real modules -------------------------------------------------------

@dataclass(frozen=True)
class CoursePreset:
    label: str
    source: str  # one sentence: where the course uses it
    build: Callable[[], nn.Module]
    stated_parameters: int | None = None  # the count the course material states, if it states one


COURSE_PRESETS: dict[str, CoursePreset] = {
    "cs224n-mingpt": CoursePreset(
        "CS224N minGPT (a5)",
        "The assignment's minGPT: vocabulary 256, block 128, 4 layers, 8 heads, 256 dimensions.",
        lambda: Transformer(ModelConfig(**PRESETS["cs224n-mingpt"])), 3_323_392),
    "cs224n-synthesizer": CoursePreset(
        "CS224N minGPT with synthesizer attention (a5)",
        "The same minGPT with the assignment's dense synthesizer in place of self-attention.",
        lambda: Transformer(ModelConfig(**PRESETS["cs224n-synthesizer"]))),
    "pytorch-tutorial-lm": CoursePreset(
        "PyTorch tutorial model, language-model head",
        "'Language Modeling with nn.Transformer' with vocabulary 50,001, 200 dimensions, 2 heads, "
        "feed-forward 200, 4 layers.",
        lambda: TutorialTransformer(50_001, 200, 2, 200, 4), 21_018_401),
    "pytorch-tutorial-2class": CoursePreset(
        "PyTorch tutorial model, 2-class head",
        "The same encoder with a 2-class linear head instead of the vocabulary-sized one.",
        lambda: TutorialTransformer(50_001, 200, 2, 200, 4, n_out=2), 10_968_602),
}


def build_preset(name: str) -> nn.Module:
    """Build on the meta device: shapes and counts are exact, no memory is allocated."""
    with torch.device("meta"):
        return COURSE_PRESETS[name].build()


# --- masks ---------------------------------------------------------------------------------------

def causal_mask(length: int) -> np.ndarray:
    """(T, T) bool, True where query i may attend key j: j <= i (a decoder never sees the future)."""
    return np.tril(np.ones((length, length), dtype=bool))


def padding_mask(is_real: Sequence[bool]) -> np.ndarray:
    """(T, T) bool: every query may attend every real key, no query attends padding. As in the model,
    an input with no real token at all attends everything rather than nothing."""
    real = np.asarray(is_real, dtype=bool)
    if not real.any():
        real = np.ones_like(real)
    return np.broadcast_to(real[None, :], (real.size, real.size)).copy()


@dataclass
class MaskInput:
    tokens: list[str]  # display strings, padding included
    is_real: list[bool]  # False for padding (and for anything the model reads as PAD)
    unknown: list[str]  # input pieces outside the tokenizer's vocabulary
    truncated: int  # tokens cut to fit the length
    read_as_padding: int  # input positions (kept ones) whose id is PAD, so the padding mask hides them


def mask_input(text: str, tokenizer=None, length: int = 16) -> MaskInput:
    """Tokenize (or split into characters without a tokenizer), cut or pad to `length`.

    With a tokenizer, a position is padding when its id is the PAD id, exactly what the model's
    padding mask uses, so a character the vocabulary lacks (read as PAD) shows as masked too.
    """
    length = max(1, int(length))
    if tokenizer is None:
        tokens, unknown = list(text), []
        real = [True] * len(tokens)
        pad_token = PAD_CHAR
    else:
        tokenized = tokenizer.tokenize(text)
        tokens, unknown = list(tokenized.tokens), list(tokenized.unknown)
        real = [i != tokenizer.pad_id for i in tokenized.ids]
        pad_token = tokenizer.decode([tokenizer.pad_id])
    truncated = max(0, len(tokens) - length)
    tokens, real = tokens[:length], real[:length]
    padding = length - len(tokens)
    return MaskInput(tokens + [pad_token] * padding, real + [False] * padding, unknown, truncated,
                     read_as_padding=real.count(False))
