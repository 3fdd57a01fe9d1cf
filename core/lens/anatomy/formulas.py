"""Parameter formulas: which closed form each module gets, and how a model splits into rows (Parts).

Every row carries the formula a student would write by hand, e.g. `4·(C² + C)` for vanilla attention.
The formula is stored as arithmetic over named symbols and evaluated by a tiny safe evaluator, so the
text on screen is exactly the expression that tests compare with the count.

Which formula a module gets comes from registries keyed by module class (looked up along the class's
MRO, so every positional scheme without parameters shares one entry); containers are walked, so any
model built from registered parts (ours, the PyTorch tutorial model) gets a table without new code. Hugging Face
families have a class per family, so their parts are found by their children's names instead (q_proj, k_proj,
v_proj, o_proj; gate_proj, up_proj, down_proj; ...): attention as a formula over C, h, g (key/value heads) and d.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

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
    "h": "attention heads (query heads)",
    "g": "key/value heads (grouped-query attention: fewer than h)",
    "d": "head size",
    "F": "feed-forward width",
    "K": "classes",
    "S": "token types (segments)",
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
    own: list[nn.Parameter] | None = None  # the row's parameters when not every parameter of `modules`

    @property
    def parameters(self) -> list[nn.Parameter]:
        return self.own if self.own is not None else [p for m in self.modules for p in m.parameters()]


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


# --- parts found by their names (Hugging Face families) --------------------------------------------
# transformers gives each family its own classes (LlamaAttention, GPTNeoXMLP, ...), but the pieces inside carry
# the same few names: a module holding q_proj, k_proj, v_proj and o_proj is an attention, gate_proj, up_proj and
# down_proj a gated MLP. Matching the names (not the classes) covers every family core.io.hf_families reads.

_SEPARATE_ATTENTION = (("q_proj", "k_proj", "v_proj", "o_proj"), ("q_proj", "k_proj", "v_proj", "dense"),
                       ("q_proj", "k_proj", "v_proj", "out_proj"), ("q_lin", "k_lin", "v_lin", "out_lin"),
                       ("self.query", "self.key", "self.value", "output.dense"))
_FUSED_ATTENTION = (("qkv_proj", "o_proj"), ("query_key_value", "dense"), ("c_attn", "c_proj"))
_GATED_MLP = (("gate_proj", "up_proj", "down_proj"), ("gate_up_proj", "down_proj"))
_PLAIN_MLP = (("fc1", "fc2"), ("dense_h_to_4h", "dense_4h_to_h"), ("c_fc", "c_proj"), ("lin1", "lin2"),
              ("intermediate.dense", "output.dense"))
_POSITION_TABLES = ("wpe", "embed_positions", "position_embeddings")
_HEAD_PATHS = ("lm_head", "cls", "pooler", "classifier", "score", "pre_classifier", "vocab_transform",
               "vocab_projector", "qa_outputs")
_VOCABULARY_HEADS = ("lm_head", "cls", "vocab_projector", "vocab_transform")


def _linear_like(m: Any) -> bool:
    """nn.Linear, or GPT-2's Conv1D (y = x @ W + b, W stored (in, out))."""
    return isinstance(m, nn.Linear) or (type(m).__name__ == "Conv1D" and getattr(m, "weight", None) is not None)


def _io(m: nn.Module) -> tuple[int, int, bool]:
    """(input features, output features, has a bias) of a Linear or Conv1D."""
    if isinstance(m, nn.Linear):
        return m.in_features, m.out_features, m.bias is not None
    rows, cols = m.weight.shape
    return rows, cols, getattr(m, "bias", None) is not None


def _sum_of_terms(terms: list[tuple[str, int]]) -> str:
    """[("C**2", 1), ("C**2", 1), ("C", 1)] -> "2*C**2 + C": like terms gathered, first-seen order."""
    gathered: dict[str, int] = {}
    for term, count in terms:
        gathered[term] = gathered.get(term, 0) + count
    return " + ".join(term if n == 1 else f"{n}*{term}" for term, n in gathered.items())


def _named_leaf(module: nn.Module, prefix: str) -> FormulaRule | None:
    """A leaf whose path says what it is: a position table, a token-type table, an output head, an RMSNorm."""
    path = prefix.split(".")
    last = path[-1]
    if isinstance(module, nn.Embedding) and last in _POSITION_TABLES:
        rows, width = module.weight.shape
        note = "one learned vector per position" + (f" (OPT: {rows} rows, 2 past its positions)"
                                                    if last == "embed_positions" else "")
        return lambda m: ("positional", Formula("T*C", {"T": rows, "C": width}, note))
    if isinstance(module, nn.Embedding) and last == "token_type_embeddings":
        rows, width = module.weight.shape
        return lambda m: ("embeddings", Formula("S*C", {"S": rows, "C": width}, "one vector per segment (A, B)"))
    if _linear_like(module) and any(part in _HEAD_PATHS for part in path):
        i, o, bias = _io(module)
        if i == o:
            return lambda m: ("head", Formula("C**2 + C" if bias else "C**2", {"C": i},
                                              "Linear(C, C) before the output"))
        symbol = "V" if any(part in _VOCABULARY_HEADS for part in path) else "K"
        what = "vocabulary" if symbol == "V" else "classes"
        return lambda m: ("head", Formula(f"C*{symbol} + {symbol}" if bias else f"C*{symbol}", {"C": i, symbol: o},
                                          f"Linear(C, {what})" + ("" if bias else "; no bias")))
    if type(module).__name__.endswith("RMSNorm"):
        own = dict(module.named_parameters())
        if set(own) == {"weight"} and own["weight"].dim() == 1:
            width = own["weight"].numel()
            scaled = " applied as (1 + w)" if type(module).__name__.startswith("Gemma") else ""
            if last in ("q_norm", "k_norm"):
                return lambda m: ("norm", Formula("d", {"d": width},
                                                  f"RMSNorm over each {'query' if last == 'q_norm' else 'key'} head: "
                                                  f"a gain{scaled}, no bias"))
            return lambda m: ("norm", Formula("C", {"C": width}, f"RMSNorm: a gain{scaled}, no bias"))
    if _linear_like(module) and not isinstance(module, nn.Linear):  # a Conv1D outside the groups below
        i, o, bias = _io(module)
        return lambda m: ("other", Formula("I*O + O" if bias else "I*O", {"I": i, "O": o}, "Conv1D"))
    return None


def _child(module: nn.Module, path: str) -> nn.Module | None:
    for name in path.split("."):
        module = module._modules.get(name)
        if module is None:
            return None
    return module if _linear_like(module) else None


def _first_int(*candidates: Any) -> int | None:
    return next((int(c) for c in candidates if isinstance(c, int) and not isinstance(c, bool) and c > 0), None)


def _head_counts(attention: nn.Module, q_width: int | None, k_width: int | None,
                 fused_width: int | None) -> tuple[int, int, int] | None:
    """(query heads h, key/value heads g, head size d) from the module (or its config); None when unknown."""
    config = getattr(attention, "config", None)
    h = _first_int(getattr(attention, "num_heads", None), getattr(attention, "num_attention_heads", None),
                   getattr(attention, "n_heads", None), getattr(config, "num_attention_heads", None))
    d = _first_int(getattr(attention, "head_dim", None), getattr(attention, "head_size", None),
                   getattr(attention, "attention_head_size", None), getattr(config, "head_dim", None))
    if d is None and h and (q_width or fused_width):
        if q_width:
            d = q_width // h
        elif getattr(config, "num_key_value_heads", None):
            d = fused_width // (h + 2 * config.num_key_value_heads)
        else:
            d = fused_width // (3 * h)
    if not d:
        return None
    if q_width is not None:
        h, g = q_width // d, k_width // d
        ok = h * d == q_width and g * d == k_width
    else:
        if h is None:
            return None
        g = (fused_width // d - h) // 2
        ok = (h + 2 * g) * d == fused_width
    return (h, g, d) if ok and h > 0 and g > 0 else None


def _attention_formula(attention: nn.Module, names: tuple[str, ...], found: list[nn.Module]) -> Formula | None:
    fused = len(found) == 2
    C, fused_width, fused_bias = _io(found[0])
    holder = attention
    for name in names[0].split(".")[:-1]:  # BERT: the counts are on attention.self, beside the projections
        holder = holder._modules[name]
    if fused:
        counts = _head_counts(attention, None, None, fused_width) or _head_counts(holder, None, None, fused_width)
        biases = (fused_bias,) * 3 + (_io(found[1])[2],)
    else:
        widths = _io(found[0])[1], _io(found[1])[1], None
        counts = _head_counts(attention, *widths) or _head_counts(holder, *widths)
        biases = tuple(_io(m)[2] for m in found)
    if counts is None:
        return None
    h, g, d = counts
    q_term = "C**2" if h * d == C else "C*h*d"
    kv_term = "C**2" if g * d == C else "C*g*d"
    terms = [(q_term, 1), (kv_term, 2), (q_term, 1)]  # q, k and v, o: o maps the h heads back to C
    bias_terms = [("C" if h * d == C else "h*d", 1), ("C" if g * d == C else "g*d", 1),
                  ("C" if g * d == C else "g*d", 1), ("C", 1)]
    terms += [term for term, present in zip(bias_terms, biases, strict=True) if present]
    which = [n for n, present in zip(("q", "k", "v", "o"), biases, strict=True) if present]
    layout = (f"one fused {names[0]} (q | k | v), then {names[1]}" if fused
              else ", ".join(n.split(".")[-1] for n in names))
    heads = f"; {g} key/value heads shared by {h} query heads" if g < h else ""
    bias_note = "; no biases" if not which else ("; biases on " + ", ".join(which) if len(which) < 4 else "; biases")
    return Formula(_sum_of_terms(terms), {"C": C, "h": h, "g": g, "d": d}, layout + heads + bias_note)


def _mlp_formula(names: tuple[str, ...], found: list[nn.Module]) -> Formula:
    C, F, _ = _io(found[0])
    biases = [_io(m)[2] for m in found]
    if names[0] == "gate_up_proj":  # Phi-3: gate and up in one (2F × C)
        F //= 2
        terms = [("C*F", 3)] + ([("F", 2)] if biases[0] else []) + ([("C", 1)] if biases[1] else [])
        return Formula(_sum_of_terms(terms), {"C": C, "F": F},
                       "gated MLP: one gate_up_proj (2F × C), act(gate)·up, down_proj (C × F)")
    if len(names) == 3:
        terms = [("C*F", 3)] + [(t, 1) for t, b in zip(("F", "F", "C"), biases, strict=True) if b]
        return Formula(_sum_of_terms(terms), {"C": C, "F": F},
                       "gated MLP: gate_proj and up_proj (F × C), act(gate)·up, down_proj (C × F)")
    terms = [("C*F", 2)] + [(t, 1) for t, b in zip(("F", "C"), biases, strict=True) if b]
    return Formula(_sum_of_terms(terms), {"C": C, "F": F},
                   "Linear(C, F), activation, Linear(F, C)" + ("" if all(biases) else "; no biases"))


def _named_groups(module: nn.Module) -> list[tuple[str, tuple[str, ...], list[nn.Module], Formula]]:
    """The attention and MLP groups among a module's children (by name): (role, names, modules, formula)."""
    groups = []
    for names in _SEPARATE_ATTENTION + _FUSED_ATTENTION:
        found = [_child(module, n) for n in names]
        if all(found) and not any(id(m) in {id(x) for g in groups for x in g[2]} for m in found):
            formula = _attention_formula(module, names, found)
            if formula is not None:
                groups.append(("attention", names, found, formula))
                break
    for names in _GATED_MLP + _PLAIN_MLP:
        found = [_child(module, n) for n in names]
        if all(found) and not any(id(m) in {id(x) for g in groups for x in g[2]} for m in found):
            groups.append(("feed-forward", names, found, _mlp_formula(names, found)))
            break
    return groups


def _group_parts(module: nn.Module, prefix: str, groups: list) -> Iterator[Part]:
    taken = {id(m) for *_, found, _ in groups for m in found}
    with_parameters = {id(m) for m in module.modules() if any(True for _ in m.parameters(recurse=False))}
    for role, names, found, formula in groups:
        whole = len(groups) == 1 and with_parameters <= taken
        name = prefix if whole else f"{prefix} ({', '.join(names)})"
        yield Part(name, role, found, formula)
    yield from _children_parts(module, prefix, taken)


def walk(module: nn.Module, prefix: str = "") -> Iterator[Part]:
    """Rows for `module`: a registered split, else a registered formula, else its children."""
    split = _lookup(SPLITS, module)
    if split is not None:
        yield from split(module, prefix)
        return
    rule = _named_leaf(module, prefix) or _lookup(FORMULAS, module)
    if rule is not None:
        role, formula = rule(module)
        yield Part(prefix, role, [module], formula)
        return
    groups = _named_groups(module)
    yield from (_group_parts(module, prefix, groups) if groups else _children_parts(module, prefix, set()))


def _children_parts(module: nn.Module, prefix: str, taken: set[int]) -> Iterator[Part]:
    """Rows of the children not in `taken` (module ids already in a row), then the module's own parameters."""
    for name, child in module.named_children():
        path = f"{prefix}.{name}" if prefix else name
        if id(child) in taken:
            continue
        if any(id(m) in taken for m in child.modules()):
            yield from _children_parts(child, path, taken)
        else:
            yield from walk(child, path)
    own = list(module.parameters(recurse=False))
    if own:  # parameters held directly by an unregistered module: counted, no closed form
        count = sum(p.numel() for p in own)
        role = "head" if any(part in _HEAD_PATHS for part in prefix.split(".")) else "other"
        yield Part(prefix or "(model)", role, [], Formula(str(count), note="own parameters; no formula"), own)
