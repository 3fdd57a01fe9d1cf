"""Head roles (core.lens.heads): hand-set weights with known answers, a plain loop, our model against a Hugging
Face folder of the same weights, the command, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from core.io import checkpoint as ckpt
from core.lens import heads
from core.lens.trace import trace
from core.model.config import ModelConfig
from core.model.tokenizer import MASK_CHAR, PAD_CHAR, CharTokenizer
from core.model.transformer import Transformer
from tests.conftest import require_hf_extra

SYMBOLS = "abcdefghijklmnopqrstuvwxyzABCDEF"  # 32 ordinary symbols; with PAD and MASK a vocabulary of 34


def _tokenizer() -> CharTokenizer:
    return CharTokenizer([PAD_CHAR, MASK_CHAR, *SYMBOLS])


def loop_scores(attention: np.ndarray, rows: np.ndarray, queries: list[int]) -> dict[str, np.ndarray]:
    """The definition, one key at a time: attention (L, S, H, T, T), rows (S, T)."""
    L, S, H, T, _ = attention.shape
    out = {role: np.zeros((L, H)) for role in heads.ROLES}
    for layer in range(L):
        for head in range(H):
            for s in range(S):
                x = rows[s]
                for i in queries:
                    a = attention[layer, s, head, i]
                    out["previous-token"][layer, head] += a[i - 1]
                    out["first-token"][layer, head] += a[0]
                    out["current-token"][layer, head] += a[i]
                    for j in range(T):
                        if 1 <= j <= i and x[j - 1] == x[i]:
                            out["induction"][layer, head] += a[j]
                        if j < i and x[j] == x[i]:
                            out["duplicate-token"][layer, head] += a[j]
    return {role: value / (S * len(queries)) for role, value in out.items()}


def _random_causal_attention(L, S, H, T, seed=0) -> np.ndarray:
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(L, S, H, T, T, generator=g) * 3
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).numpy()


def test_scores_match_a_plain_loop_on_random_attention():
    rng = np.random.default_rng(1)
    n = 6
    segment = rng.integers(2, 7, size=(4, n))  # a small vocabulary: repeats inside the segment too
    rows = np.concatenate([np.full((4, 1), 1), segment, segment], axis=1)
    attention = _random_causal_attention(3, 4, 2, rows.shape[1])
    queries = list(range(1 + n, 1 + 2 * n))
    sums = heads.scores_from_attention(attention, rows, np.array(queries))
    expected = loop_scores(attention, rows, queries)
    for role in heads.ROLES:
        np.testing.assert_allclose(sums[role] / (4 * n), expected[role], atol=1e-9, err_msg=role)


def test_head_roles_of_a_model_match_the_loop_over_single_traces():
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=34, block_size=32, n_layer=2, n_head=2, n_embd=16, dropout=0.0)).eval()
    tokenizer = _tokenizer()
    probe = heads.probe_for(model, tokenizer, length=8, samples=5, seed=3)
    roles = heads.head_roles(model, tokenizer, length=8, samples=5, seed=3)
    per_row = np.stack([trace(model, row.tolist()).attention for row in probe.rows], axis=1)  # (L, S, H, T, T)
    expected = loop_scores(per_row, probe.rows, probe.queries.tolist())
    for role in heads.ROLES:
        np.testing.assert_allclose(roles.scores[role], expected[role], atol=1e-5, err_msg=role)
    assert probe.rows.min() >= 2, "PAD and MASK are never drawn"
    assert np.array_equal(probe.rows[:, :8], probe.rows[:, 8:]), "the segment repeats"


def test_a_standard_error_bound_stops_early_on_the_probes_first_rows_and_says_so():
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=34, block_size=32, n_layer=2, n_head=2, n_embd=16, dropout=0.0)).eval()
    tokenizer = _tokenizer()
    every = heads.head_roles(model, tokenizer, length=8, samples=100, seed=3)
    assert every.samples == every.drawn == 100 and every.bound == 0
    bounded = heads.head_roles(model, tokenizer, length=8, samples=100, seed=3, stderr=0.05)
    assert bounded.samples < 100 and bounded.samples in [heads.ROWS_PER_STEP << k for k in range(5)]  # 5, 10, 20..
    probe = heads.probe_for(model, tokenizer, length=8, samples=100, seed=3)
    used = probe.rows[:bounded.samples]  # the probe's first rows, in order
    per_row = np.stack([trace(model, row.tolist()).attention for row in used], axis=1)  # (L, S, H, T, T)
    expected = loop_scores(per_row, used, probe.queries.tolist())
    errors = []
    for role in heads.ROLES:
        np.testing.assert_allclose(bounded.scores[role], expected[role], atol=1e-5, err_msg=role)
        each = np.stack([loop_scores(per_row[:, s:s + 1], used[s:s + 1], probe.queries.tolist())[role]
                         for s in range(len(used))])  # (S, L, H): each row's score
        errors.append(each.std(axis=0, ddof=1).max() / np.sqrt(len(used)))
    assert bounded.stderr == pytest.approx(max(errors), rel=1e-4)
    assert max(errors) * heads.spread_upper_factor(bounded.samples) < 0.05  # sure at 95% confidence
    shorter = bounded.samples // 2  # the step before was not
    if shorter >= 2:
        fewer = heads.head_roles(model, tokenizer, length=8, samples=shorter, seed=3)
        assert fewer.stderr * heads.spread_upper_factor(shorter) >= 0.05
    assert f"on {bounded.samples} repeated random segments of 8 tokens (of up to 100" in bounded.sentence()
    assert f"largest standard error {bounded.stderr:.3f}" in bounded.sentence()
    assert heads.head_roles(model, tokenizer, length=8, samples=100, seed=3, stderr=1e-9).samples == 100


def test_the_spread_bound_is_the_chi_square_quantiles():
    # sqrt(k / chi2_0.05(k)) from the chi-square table: k = 4: 0.711, k = 9: 3.325, k = 19: 10.117, k = 99: 77.046
    for n, quantile in ((5, 0.711), (10, 3.325), (20, 10.117), (100, 77.046)):
        exact = np.sqrt((n - 1) / quantile)
        assert exact <= heads.spread_upper_factor(n) <= 1.03 * exact


def _hand_set_induction_model(block: int = 48, gain: float = 4.0) -> Transformer:
    """Two one-head attention-only layers in three subspaces of the stream: the token (one-hot), its position
    (one-hot), and the previous token (written by layer 0). Layer 0 attends to key i-1 and copies its token into
    the previous-token subspace; layer 1's query is the current token and its key the previous token: it attends
    to the token after an earlier copy of the current one (an induction head)."""
    V = len(SYMBOLS) + 2
    C = V + block + V
    prev = V + block  # where the previous token is written
    config = ModelConfig(vocab_size=V, block_size=block, n_layer=2, n_head=1, n_embd=C, dropout=0.0, mlp=False)
    model = Transformer(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for norm in [model.ln_f, *(b.ln1 for b in model.blocks)]:
            norm.weight.fill_(1.0)
        model.tok_emb.weight[torch.arange(V), torch.arange(V)] = 1.0
        model.pos.table[torch.arange(block), V + torch.arange(block)] = 1.0
        first, second = model.blocks[0].attn, model.blocks[1].attn
        for i in range(block):
            first.query.weight[V + i, V + i] = gain
            if i + 1 < block:
                first.key.weight[V + i + 1, V + i] = gain  # key j answers query j + 1
        for t in range(V):
            first.value.weight[prev + t, t] = 1 / 7  # the copied token: about as large as the others after LN
            second.query.weight[t, t] = gain
            second.key.weight[t, prev + t] = gain
        for layer in (first, second):
            layer.proj.weight.copy_(torch.eye(C))
    return model


def test_hand_set_previous_token_and_induction_heads_score_as_built():
    roles = heads.head_roles(_hand_set_induction_model(), _tokenizer(), length=20, samples=40, seed=0)
    assert roles.scores["previous-token"][0, 0] > 0.95
    assert roles.scores["induction"][0, 0] < 0.15  # only where x[i-2] happens to equal x[i]
    assert roles.scores["current-token"][0, 0] < 0.05
    assert roles.scores["induction"][1, 0] > 0.9
    assert roles.scores["previous-token"][1, 0] < 0.1
    assert roles.strongest("induction")[:2] == (1, 0)
    assert roles.role_of(0, 0)[0] == "previous-token" and roles.role_of(1, 0)[0] == "induction"
    assert "induction L1H0" in roles.sentence()


def test_a_head_on_the_first_or_current_token_scores_one():
    T = 9
    rows = np.array([[1, 2, 3, 4, 5, 2, 3, 4, 5]])
    first = np.zeros((1, 1, 1, T, T))
    first[..., 0] = 1.0
    current = np.eye(T).reshape(1, 1, 1, T, T)
    queries = np.arange(5, 9)
    assert heads.scores_from_attention(first, rows, queries)["first-token"][0, 0] / 4 == pytest.approx(1.0)
    sums = heads.scores_from_attention(current, rows, queries)
    assert sums["current-token"][0, 0] / 4 == pytest.approx(1.0)
    assert sums["duplicate-token"][0, 0] == 0.0  # key i itself is not an earlier copy


def test_our_model_and_a_hugging_face_folder_of_the_same_weights_score_the_same(tmp_path):
    transformers = require_hf_extra()
    from core.io.hf import load_folder
    from tests.hf_models import gpt2_folder

    folder = gpt2_folder(tmp_path / "gpt2")
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text())
    config["activation_function"] = "gelu"  # exact GELU, as our blocks use
    config_path.write_text(json.dumps(config))
    theirs = transformers.GPT2LMHeadModel.from_pretrained(folder, local_files_only=True).state_dict()
    C, L = config["n_embd"], config["n_layer"]
    ours = Transformer(ModelConfig(vocab_size=config["vocab_size"], block_size=config["n_positions"], n_layer=L,
                                   n_head=config["n_head"], n_embd=C, dropout=0.0)).eval()
    state = {"tok_emb.weight": theirs["transformer.wte.weight"], "pos.table": theirs["transformer.wpe.weight"],
             "ln_f.weight": theirs["transformer.ln_f.weight"], "ln_f.bias": theirs["transformer.ln_f.bias"],
             "head.unembed.weight": theirs["lm_head.weight"]}
    for i in range(L):
        h = f"transformer.h.{i}."
        qkv_w, qkv_b = theirs[h + "attn.c_attn.weight"].T, theirs[h + "attn.c_attn.bias"]  # Conv1D: (in, out)
        for k, name in enumerate(("query", "key", "value")):
            state[f"blocks.{i}.attn.{name}.weight"] = qkv_w[k * C:(k + 1) * C]
            state[f"blocks.{i}.attn.{name}.bias"] = qkv_b[k * C:(k + 1) * C]
        state[f"blocks.{i}.attn.proj.weight"] = theirs[h + "attn.c_proj.weight"].T
        state[f"blocks.{i}.attn.proj.bias"] = theirs[h + "attn.c_proj.bias"]
        for ours_name, their_name in (("ln1", "ln_1"), ("ln2", "ln_2")):
            state[f"blocks.{i}.{ours_name}.weight"] = theirs[h + their_name + ".weight"]
            state[f"blocks.{i}.{ours_name}.bias"] = theirs[h + their_name + ".bias"]
        state[f"blocks.{i}.mlp.0.weight"] = theirs[h + "mlp.c_fc.weight"].T
        state[f"blocks.{i}.mlp.0.bias"] = theirs[h + "mlp.c_fc.bias"]
        state[f"blocks.{i}.mlp.2.weight"] = theirs[h + "mlp.c_proj.weight"].T
        state[f"blocks.{i}.mlp.2.bias"] = theirs[h + "mlp.c_proj.bias"]
    ours.load_state_dict({k: v.contiguous() for k, v in state.items()})
    loaded = load_folder(folder)
    probe = heads.probe_for(loaded.model, loaded.tokenizer, length=12, samples=20, seed=0)
    assert probe.bos is not None and (probe.rows[:, 0] == probe.bos).all(), "GPT-2's BOS is prepended"
    assert probe.bos not in probe.rows[:, 1:]
    from_hf = heads.head_roles(loaded.model, loaded.tokenizer, length=12, samples=20, seed=0)
    from_ours = heads.score_probe(ours, probe)
    for role in heads.ROLES:
        np.testing.assert_allclose(from_ours.scores[role], from_hf.scores[role], atol=1e-4, err_msg=role)


def test_a_model_too_short_for_the_segment_gets_a_sentence_and_a_shorter_probe():
    model = Transformer(ModelConfig(vocab_size=34, block_size=16, n_layer=1, n_head=2, n_embd=8, dropout=0.0)).eval()
    roles = heads.head_roles(model, _tokenizer(), length=20, samples=4)
    assert roles.length == 8
    assert roles.notes == ["This model reads at most 16 tokens, so the repeated segment is 8 tokens long instead "
                           "of 20."]


def test_bad_requests_are_one_sentence():
    vocabulary = np.arange(2, 10)
    for length, samples in ((0, 10), (5, 0), (True, 3)):
        with pytest.raises(heads.HeadRolesError):
            heads.repeated_probe(vocabulary, length, samples)
    with pytest.raises(heads.HeadRolesError, match="fewer than two"):
        heads.repeated_probe(np.array([5]), 4, 2)
    with pytest.raises(heads.HeadRolesError, match="too few"):
        heads.repeated_probe(vocabulary, 4, 2, max_length=3)


def test_recorded_attention_gets_the_roles_that_need_no_designed_input():
    T = 6
    previous = np.zeros((1, 1, T, T))
    previous[0, 0, 0, 0] = 1.0
    for i in range(1, T):
        previous[0, 0, i, i - 1] = 1.0
    roles = heads.roles_from_attention(previous)
    assert set(roles.scores) == set(heads.NO_DESIGNED_INPUT)
    assert roles.scores["previous-token"][0, 0] == pytest.approx(1.0)
    assert "Induction and duplicate-token" in roles.notes[0]
    with pytest.raises(heads.HeadRolesError):
        heads.roles_from_attention(np.zeros((2, 2, 1, 1)))


def _saved_model(path: Path) -> Path:
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=34, block_size=32, n_layer=2, n_head=2, n_embd=16, dropout=0.0))
    ckpt.save(path, model, _tokenizer(), "lm")
    return path


def test_the_command_prints_a_table_and_json_lines(tmp_path, capsys):
    path = _saved_model(tmp_path / "m.safetensors")
    assert heads.main([str(path), "--length", "6", "--samples", "10", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 2 * 2 * 5
    assert set(lines[0]) == {"layer", "head", "role", "score"}
    model = ckpt.load(path).model
    expected = heads.head_roles(model, _tokenizer(), 6, 10, 0, stderr=heads.DEFAULT_STDERR)  # the command's default
    row = next(r for r in lines if r["layer"] == 1 and r["head"] == 0 and r["role"] == "induction")
    assert row["score"] == pytest.approx(float(expected.scores["induction"][1, 0]), abs=1e-4)
    assert heads.main([str(path), "--length", "6", "--samples", "10", "--stderr", "0", "--json"]) == 0
    every = heads.head_roles(model, _tokenizer(), 6, 10, 0)  # --stderr 0: all 10 rows
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    row = next(r for r in lines if r["layer"] == 1 and r["head"] == 0 and r["role"] == "induction")
    assert row["score"] == pytest.approx(float(every.scores["induction"][1, 0]), abs=1e-4)
    assert heads.main([str(path), "--length", "6", "--samples", "10", "--stderr", "0"]) == 0
    out = capsys.readouterr().out
    assert "Strongest heads on 10 repeated random segments of 6 tokens" in out
    assert out.startswith("Scores on 10 repeated random segments of 6 tokens, largest standard error")


@pytest.mark.parametrize("args, said", [
    (["missing.safetensors"], "missing.safetensors"),
    (["{path}", "--step", "5"], "keeps no training-step snapshots"),
    (["{path}", "--length", "0"], "at least 1"),
    (["{path}", "--stderr", "-0.1"], "--stderr must be"),
])
def test_the_command_refuses_bad_input_in_one_sentence(tmp_path, capsys, args, said):
    path = _saved_model(tmp_path / "m.safetensors")
    argv = [a.format(path=path) if "{path}" in a else str(tmp_path / a) if a.endswith(".safetensors") else a
            for a in args]
    assert heads.main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize("family", ["llama", "gpt_neox", "gemma2", "bert"])
def test_hugging_face_families_score_as_transformers_own_attention_through_the_loop(tmp_path, family):
    transformers = require_hf_extra()
    from bench.hf_folders import bert_folder, decoder_folder
    from core.io.hf import load_folder

    folder = bert_folder(tmp_path / family) if family == "bert" else decoder_folder(tmp_path / family, family)
    loaded = load_folder(folder)
    probe = heads.probe_for(loaded.model, loaded.tokenizer, length=6, samples=4, seed=1)
    assert probe.bos is not None, "a BOS ([CLS] for BERT) in front"
    special = heads._special_ids(loaded.tokenizer)
    assert not set(probe.rows[:, 1:].ravel()) & special
    roles = heads.head_roles(loaded.model, loaded.tokenizer, length=6, samples=4, seed=1)
    cls = transformers.BertForMaskedLM if family == "bert" else transformers.AutoModelForCausalLM
    theirs = cls.from_pretrained(folder, local_files_only=True, attn_implementation="eager").eval()
    with torch.no_grad():
        out = theirs(torch.tensor(probe.rows), output_attentions=True)
    attention = torch.stack(out.attentions).numpy()  # (L, S, H, T, T)
    expected = loop_scores(attention, probe.rows, probe.queries.tolist())
    for role in heads.ROLES:
        np.testing.assert_allclose(roles.scores[role], expected[role], atol=1e-5, err_msg=role)
        assert ((roles.scores[role] >= 0) & (roles.scores[role] <= 1 + 1e-6)).all()


def test_a_converted_nanogpt_model_is_scored_like_our_own(tmp_path):
    from core.io.convert import main as convert
    from tests.test_nanogpt import CHARS, meta_pkl, nanogpt_ckpt, write_ckpt

    ckpt_path = write_ckpt(tmp_path / "ckpt.pt", nanogpt_ckpt(bias=False))
    (tmp_path / "meta.pkl").write_bytes(meta_pkl(CHARS))
    out = tmp_path / "nano.safetensors"
    assert convert(["nanogpt", str(ckpt_path), "--meta", str(tmp_path / "meta.pkl"), "-o", str(out)]) == 0
    loaded = ckpt.load(out)
    roles = heads.head_roles(loaded.model, loaded.tokenizer, length=5, samples=6)
    probe = heads.probe_for(loaded.model, loaded.tokenizer, length=5, samples=6)
    assert probe.bos is None and probe.rows.shape[1] == 10, "nanoGPT has no BOS"
    per_row = np.stack([trace(loaded.model, row.tolist()).attention for row in probe.rows], axis=1)
    expected = loop_scores(per_row, probe.rows, probe.queries.tolist())
    for role in heads.ROLES:
        np.testing.assert_allclose(roles.scores[role], expected[role], atol=1e-5, err_msg=role)
