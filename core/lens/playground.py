"""Attention by hand: the small, exact computations behind the playground page (no streamlit).

Scores are plain dot products q·k_i, as in the CS224N a5 written questions ("Attention exploration"),
unless `scaled=True` divides them by sqrt(d) as a transformer does. Everything is float64 numpy so a
table on screen can be checked with a calculator.

Two parts:
- `attend` and the `PRESETS` registry: keys K (n, d), values V (n, d), queries Q (m, d) -> scores,
  softmax weights and outputs c; each preset is one of the course's constructions (copy one value,
  average two, change one key, ...) with the output it should approach.
- `noisy_keys_experiment`: one head versus two heads when one key's norm varies (questions c and d).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

MAX_SIZE = 8  # n keys and d dimensions: small enough to do by hand, big enough to see n > d
DEFAULT_SEED = 0


class PlaygroundError(ValueError):
    """Input the playground cannot compute with; the message is one sentence for the user."""


def softmax(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax: subtracting the row maximum changes nothing but avoids overflow."""
    scores = np.asarray(scores, dtype=np.float64)
    shifted = scores - scores.max(axis=axis, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=axis, keepdims=True)


def score_scale(d: int, scaled: bool) -> float:
    """1/sqrt(d) for scaled dot-product attention, 1 for the course's hand calculations."""
    return 1.0 / math.sqrt(d) if scaled else 1.0


@dataclass
class AttentionResult:
    scores: np.ndarray  # (m, n): q_j·k_i, times 1/sqrt(d) when scaled
    weights: np.ndarray  # (m, n): softmax over keys; every row sums to 1
    output: np.ndarray  # (m, d_v): c_j = sum_i weights[j, i] v_i


def _matrix(name: str, value: np.ndarray | list) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or 0 in array.shape:
        raise PlaygroundError(f"{name} must be a non-empty table of numbers.")
    if not np.all(np.isfinite(array)):
        raise PlaygroundError(f"{name} contains a value that is not a finite number.")
    return array


def attend(Q: np.ndarray | list, K: np.ndarray | list, V: np.ndarray | list,
           scaled: bool = False) -> AttentionResult:
    """Q (m, d) or q (d,), K (n, d), V (n, d_v) -> scores, weights, outputs."""
    Q, K, V = _matrix("The query", Q), _matrix("K", K), _matrix("V", V)
    if Q.shape[1] != K.shape[1]:
        raise PlaygroundError(f"Queries have {Q.shape[1]} dimensions but keys have {K.shape[1]}.")
    if K.shape[0] != V.shape[0]:
        raise PlaygroundError(f"There are {K.shape[0]} keys but {V.shape[0]} values; one value per key.")
    scores = (Q @ K.T) * score_scale(K.shape[1], scaled)  # (m, n)
    weights = softmax(scores)
    return AttentionResult(scores=scores, weights=weights, output=weights @ V)


# --- example tables -------------------------------------------------------------------------------

def orthonormal_keys(n: int, d: int, seed: int = DEFAULT_SEED) -> np.ndarray:
    """k_i = e_i (unit, pairwise orthogonal) for i < d; past d they cannot be, so random unit vectors."""
    keys = np.zeros((n, d))
    basis = min(n, d)
    keys[:basis, :basis] = np.eye(basis)
    if n > d:
        extra = np.random.default_rng(seed).standard_normal((n - d, d))
        keys[d:] = extra / np.linalg.norm(extra, axis=1, keepdims=True)
    return keys


def example_keys(n: int, d: int, seed: int = DEFAULT_SEED) -> np.ndarray:
    """Small integers in [-2, 2] with full rank min(n, d), so least squares behaves as the text says."""
    rng = np.random.default_rng(seed)
    while True:  # full rank is the common case; the loop rarely runs twice
        keys = rng.integers(-2, 3, size=(n, d)).astype(np.float64)
        if np.linalg.matrix_rank(keys) == min(n, d):
            return keys


def example_values(n: int, d: int, seed: int = DEFAULT_SEED + 1) -> np.ndarray:
    """Small integers in [-5, 5]: easy to recognise in the output c."""
    return np.random.default_rng(seed).integers(-5, 6, size=(n, d)).astype(np.float64)


def select_query(K: np.ndarray, index: int, beta: float) -> np.ndarray:
    """q = lstsq(K, t) for target scores t = beta at `index`, 0 elsewhere (exact when rank K = n)."""
    target = np.zeros(K.shape[0])
    target[index] = beta
    return np.linalg.lstsq(K, target, rcond=None)[0]


def identity_queries(K: np.ndarray, beta: float) -> np.ndarray:
    """Q with K Q^T as close as least squares gets to beta*I; for orthonormal keys Q = beta*K."""
    return np.linalg.lstsq(K, beta * np.eye(K.shape[0]), rcond=None)[0].T


def unit_orthogonal_to(q: np.ndarray, hint: np.ndarray) -> np.ndarray:
    """A unit vector orthogonal to q: the part of `hint` orthogonal to q, else any basis direction."""
    u = q / np.linalg.norm(q)
    for candidate in (hint, *np.eye(q.size)):
        w = candidate - (candidate @ u) * u
        if np.linalg.norm(w) > 1e-9:
            return w / np.linalg.norm(w)
    raise PlaygroundError("Need at least two dimensions for a direction orthogonal to the query.")


def key_for_average_of_three(q: np.ndarray, beta: float, old_key: np.ndarray) -> np.ndarray:
    """A unit k with q·k = beta when q = beta(k_0 + k_1): 45 degrees from q, so (k_0+k_1)/2 + w/sqrt(2)."""
    u = q / np.linalg.norm(q)
    w = unit_orthogonal_to(q, old_key)
    cos = beta / np.linalg.norm(q)  # = 1/sqrt(2) for orthonormal k_0, k_1
    return cos * u + math.sqrt(max(0.0, 1.0 - cos * cos)) * w


# --- tables the user edits -----------------------------------------------------------------------

def labels(matrix: np.ndarray, row_name: str, column_name: str = "x") -> tuple[list[str], list[str]]:
    """Rows k_0, k_1, ... and columns x0, x1, ...: the labels the course uses."""
    return ([f"{row_name}_{i}" for i in range(len(matrix))],
            [f"{column_name}{j}" for j in range(np.shape(matrix)[1])])


def to_frame(matrix: np.ndarray, row_name: str, column_name: str = "x") -> pd.DataFrame:
    """The matrix as a frame under `labels`."""
    rows, columns = labels(matrix, row_name, column_name)
    return pd.DataFrame(np.asarray(matrix, dtype=np.float64), index=rows, columns=columns)


def from_frame(frame: pd.DataFrame) -> tuple[np.ndarray, int]:
    """An edited table as float64, and how many cells were empty or not numbers (they count as 0)."""
    if all(pd.api.types.is_float_dtype(kind) for kind in frame.dtypes):  # as drawn, or edited with numbers: no
        numbers = frame.to_numpy(dtype=np.float64, na_value=np.nan)  # column to read (a pandas apply a rerun)
    else:
        numbers = frame.apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    missing = ~np.isfinite(numbers)
    return np.where(missing, 0.0, numbers), int(missing.sum())


# --- presets --------------------------------------------------------------------------------------

@dataclass
class Setup:
    K: np.ndarray  # (n, d)
    V: np.ndarray  # (n, d)
    Q: np.ndarray  # (m, d)
    target: np.ndarray  # (m, d): the output each query should approach as beta grows
    target_label: str  # how the course writes that target, e.g. "(v_0 + v_1)/2"
    note: str = ""  # a caveat for these sizes (e.g. n > d), or ""


@dataclass(frozen=True)
class PlaygroundPreset:
    label: str
    explanation: str  # one sentence: why this query (or key) does what it does
    build: Callable[[int, int, float], Setup]  # (n, d, beta) -> tables
    min_keys: int = 1
    min_dims: int = 1


def _not_orthogonal_note(n: int, d: int) -> str:
    if n <= d:
        return ""
    return (f"With n = {n} keys in d = {d} dimensions the keys cannot all be orthogonal, "
            f"so the keys after k_{d - 1} take some weight.")


def _blank(n: int, d: int, beta: float) -> Setup:
    V = example_values(n, d)
    return Setup(np.zeros((n, d)), V, np.zeros((1, d)), V.mean(0, keepdims=True), "mean of all v_i")


def _select(n: int, d: int, beta: float) -> Setup:
    K, V = example_keys(n, d), example_values(n, d)
    note = "" if n <= d else (f"K is {n}×{d}: K q = t has no exact solution, so least squares "
                              "only approximates the target scores and v_0 gets less weight.")
    return Setup(K, V, select_query(K, 0, beta)[None, :], V[:1], "v_0", note)


def _identity(n: int, d: int, beta: float) -> Setup:
    K, V = orthonormal_keys(n, d), example_values(n, d)
    return Setup(K, V, identity_queries(K, beta), V.copy(), "v_i for query i", _not_orthogonal_note(n, d))


def _average_all(n: int, d: int, beta: float) -> Setup:
    K, V = example_keys(n, d), example_values(n, d)
    return Setup(K, V, np.zeros((1, d)), V.mean(0, keepdims=True), "mean of all v_i")


def _average_two(n: int, d: int, beta: float) -> Setup:
    K, V = orthonormal_keys(n, d), example_values(n, d)
    q = beta * (K[0] + K[1])
    return Setup(K, V, q[None, :], (V[:1] + V[1:2]) / 2, "(v_0 + v_1)/2", _not_orthogonal_note(n, d))


def _change_key_average_three(n: int, d: int, beta: float) -> Setup:
    K, V = orthonormal_keys(n, d), example_values(n, d)
    q = beta * (K[0] + K[1])
    if beta > 0:  # with beta = 0 every score is 0 anyway; keep k_2 as it was
        K[2] = key_for_average_of_three(q, beta, K[2])
    return Setup(K, V, q[None, :], V[:3].mean(0, keepdims=True), "(v_0 + v_1 + v_2)/3",
                 _not_orthogonal_note(n, d))


def _change_key_return_v2(n: int, d: int, beta: float) -> Setup:
    K, V = orthonormal_keys(n, d), example_values(n, d)
    q = beta * (K[0] + K[1])
    K[2] = (K[0] + K[1]) / np.linalg.norm(K[0] + K[1])  # q/||q||, also defined at beta = 0
    return Setup(K, V, q[None, :], V[2:3], "v_2", _not_orthogonal_note(n, d))


PRESETS: dict[str, PlaygroundPreset] = {
    "blank": PlaygroundPreset(
        "Blank (all zeros)",
        "Every key and the query are zero, so every score is 0 and the weights are uniform; type your "
        "own numbers into the tables.", _blank),
    "select": PlaygroundPreset(
        "Select v_0 (least squares)",
        r"Solve $Kq = t$ by least squares for the target scores $t = (\beta, 0, \dots, 0)$: with linearly "
        r"independent keys ($n \le d$) the scores are hit exactly, so $v_0$ gets the weight "
        r"$e^\beta / (e^\beta + n - 1)$, while with more keys than dimensions ($n > d$) least squares only "
        "gets close.", _select),
    "identity": PlaygroundPreset(
        "Identity (one query per key)",
        r"Least squares for $KQ^\top = \beta I$ gives $q_i = \beta k_i$ for orthonormal keys, so query $i$ "
        r"scores its own key $\beta$ and the others 0, the attention matrix approaches the identity and row "
        r"$i$ returns $v_i$.",
        _identity),
    "average-all": PlaygroundPreset(
        "Average all (q = 0)",
        r"$q = 0$ gives every key the score 0 whatever the keys are, so every weight is $1/n$ and $c$ is "
        "the plain average of the values.", _average_all),
    "average-two": PlaygroundPreset(
        "Average two: q = β(k_0 + k_1)",
        r"With orthogonal unit keys, $q = \beta(k_0 + k_1)$ scores $k_0$ and $k_1$ at $\beta$ and every "
        r"other key at 0, so as $\beta$ grows the weights become $\tfrac12, \tfrac12$ and "
        r"$c \to (v_0 + v_1)/2$.", _average_two, min_keys=2,
        min_dims=2),
    "change-key-average-three": PlaygroundPreset(
        "Change k_2: average three",
        r"Keeping $q = \beta(k_0 + k_1)$, the unit key $k_2 = (k_0 + k_1)/2 + w/\sqrt2$ ($w$ a unit vector "
        r"orthogonal to $k_0$ and $k_1$) is 45° from $q$, so $q \cdot k_2 = \lVert q\rVert \cos 45° = "
        r"\beta\sqrt2/\sqrt2 = \beta$ ties with $k_0$ and $k_1$ and $c$ averages $v_0$, $v_1$ and $v_2$.",
        _change_key_average_three, min_keys=3, min_dims=2),
    "change-key-return-v2": PlaygroundPreset(
        "Change k_2: return v_2 (‖k_2‖ = 1)",
        r"Among unit vectors $q \cdot k_2$ is largest for $k_2 = q/\lVert q\rVert = (k_0 + k_1)/\sqrt2$, "
        r"which scores $\lVert q\rVert = \beta\sqrt2$ against $\beta$ for $k_0$ and $k_1$, so $v_2$ wins by "
        r"the factor $e^{(\sqrt2-1)\beta}$ and takes almost all weight once $\beta$ is large "
        r"($\beta \approx 13$ for 0.99).", _change_key_return_v2, min_keys=3, min_dims=2),
}


def preset_sizes(name: str, n: int, d: int) -> tuple[int, int]:
    """The sizes a preset runs at: the requested ones, raised to what the construction needs."""
    preset = PRESETS[name]
    return max(n, preset.min_keys), max(d, preset.min_dims)


def build_setup(name: str, n: int, d: int, beta: float, scaled: bool = False) -> Setup:
    """The preset's tables at these sizes; with scaling on, Q is multiplied by sqrt(d) so the scaled
    scores are the ones the construction aims for."""
    if name not in PRESETS:
        raise PlaygroundError(f"Unknown preset {name!r}; choose one of: {', '.join(PRESETS)}.")
    if not (1 <= n <= MAX_SIZE and 1 <= d <= MAX_SIZE):
        raise PlaygroundError(f"n and d must be between 1 and {MAX_SIZE}.")
    if not math.isfinite(beta) or beta < 0:
        raise PlaygroundError("β must be a finite number ≥ 0.")
    n, d = preset_sizes(name, n, d)
    setup = PRESETS[name].build(n, d, float(beta))
    setup.Q = setup.Q / score_scale(d, scaled)
    return setup


# --- one head versus two heads under noisy keys (a5 questions c and d) -----------------------------

@dataclass
class NoisyKeysResult:
    """Per sample (S,): the weight each setup puts on v_a and v_b, and ||c - (v_a + v_b)/2||."""

    single_weight_a: np.ndarray
    single_weight_b: np.ndarray
    single_distance: np.ndarray
    two_weight_a: np.ndarray
    two_weight_b: np.ndarray
    two_distance: np.ndarray

    def panels(self) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """(title, one-head values, two-head values) for each quantity, in display order."""
        return [
            ("weight on v_a", self.single_weight_a, self.two_weight_a),
            ("weight on v_b", self.single_weight_b, self.two_weight_b),
            ("‖c − (v_a + v_b)/2‖", self.single_distance, self.two_distance),
        ]

    def summary(self) -> list[dict[str, float | str]]:
        rows = []
        for title, single, two in self.panels():
            for setup, values in (("one head", single), ("two heads", two)):
                rows.append({"quantity": title, "setup": setup, "mean": float(values.mean()),
                             "std": float(values.std()), "min": float(values.min()),
                             "max": float(values.max())})
        return rows


def noisy_key_means(n: int, d: int) -> np.ndarray:
    """Orthonormal means mu_i = e_i (rows), which are also the values v_i as in the course."""
    if not 2 <= n <= d:
        raise PlaygroundError(f"The experiment needs 2 ≤ n ≤ d (orthonormal means); got n = {n}, d = {d}.")
    return np.eye(n, d)


def sample_noisy_keys(n: int, d: int, alpha: float, samples: int, rng: np.random.Generator,
                      a: int = 0) -> np.ndarray:
    """(samples, n, d) keys k_i ~ N(mu_i, alpha I), and k_a ~ N(mu_a, alpha I + 1/2 mu_a mu_a^T).

    Exact covariance without a Cholesky factor: adding sqrt(1/2) z mu_a with a scalar z ~ N(0, 1)
    adds exactly 1/2 mu_a mu_a^T, i.e. k_a = (1 + z/sqrt(2)) mu_a + noise: its norm swings.
    """
    if alpha < 0 or not math.isfinite(alpha):
        raise PlaygroundError("α is a variance, so it must be a finite number ≥ 0.")
    if samples < 1:
        raise PlaygroundError("Draw at least one sample.")
    means = noisy_key_means(n, d)
    keys = means + math.sqrt(alpha) * rng.standard_normal((samples, n, d))
    keys[:, a] += math.sqrt(0.5) * rng.standard_normal((samples, 1)) * means[a]
    return keys


def noisy_keys_experiment(n: int, d: int, alpha: float, beta: float, samples: int,
                          seed: int = DEFAULT_SEED, a: int = 0, b: int = 1) -> NoisyKeysResult:
    """One head with q = beta(mu_a + mu_b) versus two heads q1 = beta mu_a, q2 = beta mu_b whose
    outputs are averaged; values v_i = mu_i. The same sampled keys feed both setups."""
    if not math.isfinite(beta) or beta < 0:
        raise PlaygroundError("β must be a finite number ≥ 0.")
    if a == b or not (0 <= a < n and 0 <= b < n):
        raise PlaygroundError("a and b must be two different keys.")
    means = noisy_key_means(n, d)
    keys = sample_noisy_keys(n, d, alpha, samples, np.random.default_rng(seed), a)  # (S, n, d)
    values = means  # (n, d)
    middle = (values[a] + values[b]) / 2

    single = softmax(keys @ (beta * (means[a] + means[b])))  # (S, n)
    head_1 = softmax(keys @ (beta * means[a]))
    head_2 = softmax(keys @ (beta * means[b]))
    two = (head_1 + head_2) / 2  # averaging the heads' outputs = averaging their weights (same V)

    def distance(weights: np.ndarray) -> np.ndarray:
        return np.linalg.norm(weights @ values - middle, axis=1)

    return NoisyKeysResult(
        single_weight_a=single[:, a], single_weight_b=single[:, b], single_distance=distance(single),
        two_weight_a=two[:, a], two_weight_b=two[:, b], two_distance=distance(two),
    )
