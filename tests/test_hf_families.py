"""Today's Hugging Face decoder families (issue 42, part 2): tiny random models of each family built here from a
config (no download), saved with save_pretrained, opened by the lab and compared with transformers' own
output_attentions / output_hidden_states / logits, and with references written here in plain torch (RoPE with
partial dimensions, RMSNorm with Gemma's (1 + w), the causal-tracing protocol with forward hooks on the
transformers model itself).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from core.io.checkpoint import CheckpointError, load
from core.lens import where_from as wf
from core.lens.trace import trace
from tests.conftest import require_hf_extra

TOL = 1e-6
TEXT = "Hello world, the cat sat on the mat."
FAMILIES = ("llama", "qwen2", "qwen3", "mistral", "gemma", "gpt_neox", "phi", "opt", "phi3", "gemma3_text", "gemma2")
ROTARY = ("llama", "qwen2", "mistral", "gemma", "gpt_neox", "phi", "phi3", "gemma2")


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    require_hf_extra()
    from bench.hf_folders import decoder_folder

    root = tmp_path_factory.mktemp("hf-families")
    return {name: decoder_folder(root / name, name) for name in FAMILIES + ("bloom",)}


def reference(folder: Path, ids: list[int]):
    """transformers itself: eager attention, output_attentions and output_hidden_states, and the model."""
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(folder, local_files_only=True,
                                                              attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    return model, out


def opened(folders, name):
    loaded = load(folders[name])
    tokenized = loaded.tokenizer.tokenize(TEXT)
    return loaded, tokenized


@pytest.mark.parametrize("name", FAMILIES)
def test_attention_logits_and_stream_equal_transformers_own(folders, name):
    loaded, tokenized = opened(folders, name)
    rec = trace(loaded.model, tokenized.ids, tokenized.tokens, activations=True)
    model, out = reference(folders[name], tokenized.ids)
    expected = torch.stack(out.attentions)[:, 0].numpy()  # (L, n_head, T, T): one map per query head
    assert rec.attention.shape == expected.shape == (2, 4, len(tokenized.ids), len(tokenized.ids))
    assert np.abs(rec.attention - expected).max() <= TOL
    assert torch.allclose(rec.logits, out.logits, atol=1e-5)
    acts = rec.activations
    for layer in range(2):  # hidden_states[l]: the stream entering layer l
        np.testing.assert_allclose(acts.resid_pre[layer], out.hidden_states[layer][0].numpy(), atol=1e-5)
    # a pre-norm decoder: the stream is the sum of what each sublayer wrote (parallel residuals too)
    summed = acts.resid_pre[0] + (acts.head_out.sum(1) + acts.mlp_out).sum(0)
    if acts.attn_bias is not None and acts.attn_bias[0] is not None:
        summed = summed + acts.attn_bias.sum(0)
    np.testing.assert_allclose(summed, acts.resid_post[-1], atol=1e-4)
    for layer in range(2):  # and layer by layer: the heads' shares add up to what the attention adds
        added = acts.head_out[layer].sum(0) + (acts.attn_bias[layer] if acts.attn_bias is not None else 0)
        np.testing.assert_allclose(added, acts.attn_out[layer], atol=1e-5)
        np.testing.assert_allclose(acts.resid_pre[layer] + acts.attn_out[layer] + acts.mlp_out[layer],
                                   acts.resid_post[layer], atol=1e-5)
    assert rec.allowed.tolist() == np.tril(np.ones((len(tokenized.ids),) * 2, dtype=bool)).tolist()


def test_grouped_key_value_heads_are_shown_per_query_head(folders):
    loaded, tokenized = opened(folders, "llama")  # 4 query heads, 2 key/value heads
    assert loaded.metadata["config"]["n_kv_head"] == 2
    assert "2 key/value heads shared by 4 query heads" in loaded.metadata["config"]["attention"]
    rec = trace(loaded.model, tokenized.ids, tokenized.tokens, queries_keys=True)
    keys = rec.queries_keys[0].k  # (4, T, hs): query heads 0, 1 read key head 0; heads 2, 3 key head 1
    assert keys.shape[0] == 4
    np.testing.assert_array_equal(keys[0], keys[1])
    np.testing.assert_array_equal(keys[2], keys[3])
    assert not np.allclose(keys[0], keys[2])
    gemma, tokenized = opened(folders, "gemma")  # one key/value head for all four query heads
    keys = trace(gemma.model, tokenized.ids, tokenized.tokens, queries_keys=True).queries_keys[1].k
    assert all(np.array_equal(keys[0], keys[h]) for h in range(4))


def rebuilt(rec, layer: int, capped: bool = True) -> np.ndarray:
    """softmax(q k^T * scale) over the allowed keys, from the recorded queries and keys (float64); where the layer
    soft-caps its scores (Gemma 2), softmax(cap * tanh(q k^T * scale / cap)) unless `capped` is False."""
    record = rec.queries_keys[layer]
    scores = np.einsum("htd,hsd->hts", record.q.astype(np.float64), record.k.astype(np.float64)) * record.scale
    if record.softcap is not None and capped:
        scores = record.softcap * np.tanh(scores / record.softcap)
    scores = np.where(rec.allowed, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True)


@pytest.mark.parametrize("name", FAMILIES)
def test_query_key_reproduces_the_attention_with_the_familys_positions(folders, name):
    loaded, tokenized = opened(folders, name)
    rec = trace(loaded.model, tokenized.ids, tokenized.tokens, queries_keys=True)
    for layer in range(2):
        assert np.abs(rebuilt(rec, layer) - rec.attention[layer]).max() <= TOL


def rope(x: torch.Tensor, theta: float, rotary_dims: int) -> torch.Tensor:
    """Plain RoPE as the GPT-NeoX / LLaMA code lays it out: the first `rotary_dims` dimensions, split in two
    halves (x1, x2) rotated by angle t * theta^(-2i/rotary_dims); the rest passes. x (n, T, hs)."""
    T = x.size(1)
    inv = theta ** (-torch.arange(0, rotary_dims, 2, dtype=torch.float64) / rotary_dims)  # (rd/2,)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * inv[None]  # (T, rd/2)
    cos, sin = torch.cos(angle), torch.sin(angle)
    rot, rest = x[..., :rotary_dims].double(), x[..., rotary_dims:].double()
    x1, x2 = rot[..., : rotary_dims // 2], rot[..., rotary_dims // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


@pytest.mark.parametrize("name", ROTARY)
def test_recorded_queries_are_the_projections_rotated_by_an_independent_rope(folders, name):
    loaded, tokenized = opened(folders, name)
    rec = trace(loaded.model, tokenized.ids, tokenized.tokens, queries_keys=True)
    model, out = reference(folders[name], tokenized.ids)
    config = model.config
    layer = model.base_model.layers[1]
    attention = layer.attention if name == "gpt_neox" else layer.self_attn
    hs = config.hidden_size // config.num_attention_heads if name != "gemma" else config.head_dim
    x = out.hidden_states[1][0]  # the stream entering layer 1 (T, C)
    with torch.no_grad():
        normed = layer.input_layernorm(x)
        if name == "gpt_neox":  # one projection, per head q | k | v
            q = attention.query_key_value(normed).view(len(x), -1, 3 * hs)[..., :hs].transpose(0, 1)
        elif name == "phi3":  # one projection: every query head, then the key heads, then the value heads
            n_head = config.num_attention_heads
            q = attention.qkv_proj(normed)[..., : n_head * hs].view(len(x), n_head, hs).transpose(0, 1)
        else:
            q = attention.q_proj(normed).view(len(x), -1, hs).transpose(0, 1)  # (nh, T, hs)
    factor = config.rope_parameters.get("partial_rotary_factor", 1.0)
    rotary_dims = int(hs * factor)
    if name in ("gpt_neox", "phi", "phi3"):
        assert rotary_dims == hs // 2  # partial rotary really is exercised
    expected = rope(q, config.rope_parameters["rope_theta"], rotary_dims)
    np.testing.assert_allclose(rec.queries_keys[1].q, expected.numpy(), atol=1e-5)
    assert not np.allclose(rec.queries_keys[1].q, q.numpy(), atol=1e-3)  # rotated: not the bare projection


def own_norm(name: str, norm, x: torch.Tensor) -> torch.Tensor:
    """The final norm written here: LayerNorm, RMSNorm, or Gemma's RMSNorm with gain (1 + w)."""
    x = x.double()
    if name in ("gpt_neox", "phi", "opt"):
        return torch.nn.functional.layer_norm(x, x.shape[-1:], norm.weight.double(), norm.bias.double(), norm.eps)
    gain = 1 + norm.weight.double() if name.startswith("gemma") else norm.weight.double()
    eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", None))
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * gain


FINAL_NORMS = {"gpt_neox": "final_layer_norm", "phi": "final_layernorm", "opt": "decoder.final_layer_norm"}


@pytest.mark.parametrize("name", FAMILIES)
def test_logit_lens_and_attribution_read_through_the_familys_own_final_norm(folders, name):
    loaded, tokenized = opened(folders, name)
    rec = trace(loaded.model, tokenized.ids, tokenized.tokens, activations=True)
    answer = int(rec.logits[0, -1].argmax())
    lens = wf.logit_lens(loaded.model, loaded.tokenizer, rec, answer)
    model, out = reference(folders[name], tokenized.ids)
    # the last row is the model's own output
    np.testing.assert_allclose(lens.probs_last[-1], torch.softmax(out.logits[0, -1].double(), -1).numpy(), atol=1e-6)
    norm = model.base_model
    for part in FINAL_NORMS.get(name, "norm").split("."):
        norm = getattr(norm, part)
    W = model.lm_head.weight.detach().double()
    b = model.lm_head.bias.detach().double() if model.lm_head.bias is not None else 0.0
    cap = getattr(model.config, "final_logit_softcapping", None)  # Gemma 2: logits = cap * tanh(z / cap)
    for row in range(len(out.hidden_states) - 1):  # every row before the last, from transformers' own streams
        with torch.no_grad():
            z = own_norm(name, norm, out.hidden_states[row][0]) @ W.T + b
            probs = torch.softmax(z if cap is None else cap * torch.tanh(z / cap), -1)
        np.testing.assert_allclose(lens.answer_prob[row], probs[:, answer].numpy(), atol=1e-5)
    attribution = wf.direct_attribution(loaded.model, rec, answer)
    logit = float(out.logits[0, -1, answer])
    if cap is not None:  # the pieces add up to the logit before the cap (hidden_states[-1]: after the final norm)
        with torch.no_grad():
            logit = float(model.lm_head(out.hidden_states[-1][0, -1])[answer])
        assert attribution.capped == pytest.approx(float(out.logits[0, -1, answer]), abs=1e-6)
    assert attribution.total == pytest.approx(logit, abs=1e-4)  # completeness
    assert attribution.logit == pytest.approx(logit, abs=1e-5)
    if name == "phi":
        assert "output head bias" in attribution.names
    # the embeddings' share from transformers' stream, through the frozen norm written here
    x = rec.activations.resid_post[-1][-1]
    stream = torch.from_numpy(x).double()
    centred = name in ("gpt_neox", "phi", "opt")
    divisor = torch.sqrt((stream.var(unbiased=False) if centred else (stream * stream).mean()) + (
        norm.eps if centred else getattr(norm, "variance_epsilon", getattr(norm, "eps", None))))
    gain = norm.weight.detach().double() + (1 if name.startswith("gemma") else 0)
    embedded = out.hidden_states[0][0, -1].double()
    embedded = embedded - embedded.mean() if centred else embedded
    assert attribution.by_layer()["embeddings"] == pytest.approx(float((embedded * gain / divisor) @ W[answer]),
                                                                 abs=1e-5)


def added_by(layers) -> dict[str, list]:
    """The modules whose outputs a decoder layer adds to its stream: the attention and the MLP, or (Gemma 2/3) the
    norms after them."""
    if hasattr(layers[0], "post_feedforward_layernorm"):
        return {"attention": [la.post_attention_layernorm for la in layers],
                "MLP": [la.post_feedforward_layernorm for la in layers]}
    return {"attention": [getattr(la, "self_attn", None) or la.attention for la in layers],
            "MLP": [la.mlp for la in layers]}


def _reference_trace(model, ids, names, answer, noise_rows, clean_pass):
    """ROME on the transformers model itself, with forward hooks written here: the noise on the name's token
    embeddings, one clean state restored at (kind, layer, position)."""
    base = model.base_model
    layers = base.layers
    modules = {"residual": list(layers), **added_by(layers)}
    embed = base.embed_tokens if hasattr(base, "embed_tokens") else base.embed_in

    def run(sample, restore=None):
        hooks = [embed.register_forward_hook(lambda _m, _i, out: out + noise_rows[sample])]
        if restore is not None:
            kind, layer, t = restore

            def patch(_m, _i, out):
                value = (out[0] if isinstance(out, tuple) else out).clone()
                value[0, t] = clean_pass[kind][layer][t]
                return (value,) + tuple(out[1:]) if isinstance(out, tuple) else value

            hooks.append(modules[kind][layer].register_forward_hook(patch))
        with torch.no_grad():
            p = torch.softmax(model(torch.tensor([ids])).logits[0, -1].double(), -1)[answer].item()
        for h in hooks:
            h.remove()
        return p

    S, L, T = noise_rows.shape[0], len(layers), len(ids)
    corrupted = np.mean([run(s) for s in range(S)])
    grids = {kind: np.array([[np.mean([run(s, (kind, layer, t)) for s in range(S)]) for t in range(T)]
                             for layer in range(L)]) for kind in modules}
    return corrupted, grids


@pytest.mark.parametrize("name", ["llama", "gpt_neox", "gemma3_text"])
def test_causal_tracing_patches_each_decoder_layers_attention_and_mlp_as_hooks_written_here_do(folders, name):
    loaded, tokenized = opened(folders, name)
    ids = tokenized.ids
    with torch.no_grad():
        answer = int(loaded.model(torch.tensor([ids]))[0][0, -1].argmax())
    names = [2, 3]
    q = wf.Question(question=TEXT, ids=ids, tokens=tokenized.tokens, raw=tokenized.tokens, name="world the",
                    name_positions=names, answer_id=answer, answer_piece=loaded.tokenizer.decode([answer]),
                    truth=None, own_answer=True)
    samples, seed, noise = 2, 5, 3.0
    product = wf.causal_trace(loaded.model, loaded.tokenizer, q, corruption="noise", samples=samples, seed=seed,
                              noise=noise)
    model, out = reference(folders[name], ids)
    embed = model.get_input_embeddings()
    with torch.no_grad():
        std = embed(torch.tensor([ids[p] for p in names])).float().std()
    draws = torch.randn(samples, len(names), model.config.hidden_size, generator=torch.Generator().manual_seed(seed))
    noise_rows = torch.zeros(samples, 1, len(ids), model.config.hidden_size)
    noise_rows[:, 0, names] = draws * noise * std
    clean_pass = {"residual": [h[0] for h in out.hidden_states[1:-1]] + [None], "attention": [], "MLP": []}
    handles = [module.register_forward_hook(lambda _m, _i, o, kind=kind: clean_pass[kind].append(
        (o[0] if isinstance(o, tuple) else o)[0])) for kind, modules in added_by(model.base_model.layers).items()
        for module in modules]
    last = []
    handles.append(model.base_model.layers[-1].register_forward_hook(lambda _m, _i, o: last.append(o[0])))
    with torch.no_grad():
        model(torch.tensor([ids]))
    for h in handles:
        h.remove()
    clean_pass["residual"][-1] = last[0]
    corrupted, grids = _reference_trace(model, ids, names, answer, noise_rows, clean_pass)
    assert product.clean == pytest.approx(torch.softmax(out.logits[0, -1].double(), -1)[answer].item(), abs=1e-6)
    assert product.corrupted == pytest.approx(corrupted, abs=1e-6)
    for kind in wf.KINDS:
        np.testing.assert_allclose(product.scores[kind], grids[kind], atol=1e-5)


def test_input_attribution_on_a_hugging_face_decoder_equals_autograd_through_inputs_embeds(folders):
    loaded, tokenized = opened(folders, "qwen2")
    ids = tokenized.ids
    with torch.no_grad():
        answer = int(loaded.model(torch.tensor([ids]))[0][0, -1].argmax())
    q = wf.Question(question=TEXT, ids=ids, tokens=tokenized.tokens, raw=tokenized.tokens, name="",
                    name_positions=[], answer_id=answer, answer_piece="", truth=None, own_answer=True)
    steps = 8
    salience = wf.input_attribution(loaded.model, q, steps=steps)
    assert all(p.grad is None for p in loaded.model.parameters())  # nothing accumulated into the shared model
    model, _ = reference(folders["qwen2"], ids)
    with torch.no_grad():
        x = model.get_input_embeddings()(torch.tensor([ids]))  # (1, T, C)

    def grad_at(alpha: float) -> torch.Tensor:
        scaled = (alpha * x).requires_grad_(True)
        log_p = torch.log_softmax(model(inputs_embeds=scaled).logits[0, -1].double(), -1)[answer]
        (g,) = torch.autograd.grad(log_p, scaled)
        return g[0].double()

    x0 = x[0].double()
    np.testing.assert_allclose(salience.gradient_x_input, (grad_at(1.0) * x0).sum(-1).numpy(), atol=1e-5)
    midpoints = torch.stack([grad_at((k + 0.5) / steps) for k in range(steps)]).mean(0)
    np.testing.assert_allclose(salience.integrated_gradients, (midpoints * x0).sum(-1).numpy(), atol=1e-5)


@pytest.mark.parametrize("model_type", ["mamba", "t5", "falcon", "mpt"])
def test_a_family_the_lab_cannot_read_is_named_in_one_sentence(folders, tmp_path, model_type):
    import shutil

    folder = tmp_path / "unread"
    shutil.copytree(folders["llama"], folder)
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = model_type
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError) as refused:
        load(folder)
    message = str(refused.value)
    assert f"'{model_type}' model, which the lab cannot read yet" in message
    assert "LLaMA" in message and "GPT-NeoX" in message and "\n" not in message and message.endswith(".")


def test_a_post_norm_opt_refuses_the_lens_in_one_sentence(tmp_path):
    require_hf_extra()
    from bench.hf_folders import decoder_folder

    loaded = load(decoder_folder(tmp_path / "opt-350m-like", "opt", do_layer_norm_before=False))
    tokenized = loaded.tokenizer.tokenize(TEXT)
    rec = trace(loaded.model, tokenized.ids, tokenized.tokens, activations=True, queries_keys=True)
    assert np.abs(rebuilt(rec, 0) - rec.attention[0]).max() <= TOL  # attention and query-key still work
    with pytest.raises(wf.WhereFromError, match="post-norm"):
        wf.logit_lens(loaded.model, loaded.tokenizer, rec, 0)
    assert not wf.patchable(loaded.model)


@pytest.mark.parametrize("name", ["llama", "gpt_neox"])
def test_the_attention_page_draws_every_view_and_the_where_from_of_a_rotary_family(folders, monkeypatch, name):
    from tests.test_attention_page import array, assert_no_exception, charts, open_page

    at = open_page(monkeypatch, folders["llama"].parent, model=name, text=TEXT)
    loaded, tokenized = opened(folders, name)
    _, out = reference(folders[name], tokenized.ids)
    at.selectbox(key="attn_layer").select(1)
    at.selectbox(key="attn_head").select(3).run()
    (fig,) = charts(at)
    z = array(fig["data"][0]["z"])
    shown = ~np.isnan(z)
    assert np.abs(z[shown] - out.attentions[1][0, 3].numpy()[shown]).max() <= TOL
    for view in ("model", "token", "qk", "combine"):
        at.radio(key="attn_view").set_value(view).run()
        assert_no_exception(at)
        assert charts(at), view
    at.radio(key="attn_view").set_value("qk").run()
    captions = " ".join(c.value for c in at.caption)
    if name == "llama":
        assert "rotated each pair of dimensions" in captions and "4 query heads share 2 key/value head(s)" in captions
    else:
        assert "the first 4 of each head's 8 dimensions (the other 4 carry no position)" in captions
    at.toggle(key="wf_next_open").set_value(True).run()
    assert_no_exception(at)
    markdown = " ".join(m.value for m in at.markdown)
    norm = "RMSNorm" if name == "llama" else "LayerNorm"
    assert f"read through the final {norm}" in markdown
    logit = float(out.logits[0, -1].max())
    assert f"against {logit:.4f}" in " ".join(c.value for c in at.caption).replace("\\", "")  # markdown-escaped


def test_a_sliding_window_never_cuts_in_the_lab_reads_no_further_than_it(folders):
    loaded = load(folders["mistral"])  # 64 positions, a 48-token window
    assert loaded.model.max_length == 48 and loaded.metadata["config"]["block_size"] == 48
    from core.lens.trace import TraceError

    with pytest.raises(TraceError, match="at most 48 tokens"):
        trace(loaded.model, list(range(5, 60)))


def test_bloom_alibi_is_the_score_bias_and_rebuilds_the_attention(folders):
    """BLOOM (ALiBi): transformers' attention, and the recorded bias equals ALiBi written here: head h of n (a power
    of two) has slope 2^(-8 (h + 1) / n), and BLOOM adds slope x key position to the scaled product."""
    loaded, tokenized = opened(folders, "bloom")
    rec = trace(loaded.model, tokenized.ids, tokenized.tokens, queries_keys=True, activations=True)
    _, out = reference(folders["bloom"], tokenized.ids)
    T = len(tokenized.ids)
    assert np.abs(rec.attention - torch.stack(out.attentions)[:, 0].numpy()).max() <= TOL
    slopes = 2.0 ** (-8.0 * np.arange(1, 5) / 4)  # (4,)
    expected = np.broadcast_to(slopes[:, None, None] * np.arange(T)[None, None, :], (4, T, T))
    for layer in range(2):
        np.testing.assert_allclose(rec.queries_keys[layer].bias, expected, atol=1e-6)
        record = rec.queries_keys[layer]
        scores = np.einsum("htd,hsd->hts", record.q.astype(np.float64), record.k.astype(np.float64)) * record.scale
        scores = np.where(rec.allowed, scores + record.bias, -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        assert np.abs(weights / weights.sum(-1, keepdims=True) - rec.attention[layer]).max() <= TOL
    assert "ALiBi" in loaded.model.config.position_note
    with pytest.raises(wf.WhereFromError, match="adds its residual inside its attention module"):
        wf.logit_lens(loaded.model, loaded.tokenizer, rec, 0)
    assert not wf.patchable(loaded.model)


def test_phi3_keys_are_the_fused_projections_key_heads_and_the_note_names_its_partial_rotary(folders):
    """Phi-3's one qkv_proj: the lab's keys (before rotary, in the dimensions rotary passes) are the slice after all
    query heads, one block per key/value head, each shared by two query heads; the query-key note says half of
    each head's dimensions are rotated (Phi-4-mini's partial_rotary_factor)."""
    loaded, tokenized = opened(folders, "phi3")
    rec = trace(loaded.model, tokenized.ids, tokenized.tokens, queries_keys=True)
    model, out = reference(folders["phi3"], tokenized.ids)
    layer = model.base_model.layers[0]
    with torch.no_grad():
        qkv = layer.self_attn.qkv_proj(layer.input_layernorm(out.hidden_states[0][0]))  # (T, (4 + 2 + 2) * 8)
    keys = qkv[:, 32:48].view(len(tokenized.ids), 2, 8).transpose(0, 1)  # (2 key heads, T, 8)
    recorded = rec.queries_keys[0].k  # (4 query heads, T, 8)
    for head in range(4):  # dimensions 4..7 carry no position: the projection itself
        np.testing.assert_allclose(recorded[head][:, 4:], keys[head // 2][:, 4:].numpy(), atol=1e-6)
    note = loaded.model.config.position_note
    assert "the first 4 of each head's 8 dimensions (the other 4 carry no position)" in note
    assert "4 query heads share 2 key/value head(s)" in note


def test_gemma3_queries_are_normed_then_rotated_with_each_layers_own_base_and_scaled_by_query_pre_attn_scalar(folders):
    """Gemma 3: q = RoPE(q_norm(q_proj(norm(x)))) with base 100 on the sliding-window layer 0 and base 10000 on the
    full-attention layer 1 (the layer's own position_embeddings), q_norm's gain 1 + w, scale 20^-0.5 (the config's
    query_pre_attn_scalar, not the head size 8); RMSNorm and RoPE written here."""
    loaded, tokenized = opened(folders, "gemma3_text")
    rec = trace(loaded.model, tokenized.ids, tokenized.tokens, queries_keys=True)
    model, out = reference(folders["gemma3_text"], tokenized.ids)
    T = len(tokenized.ids)

    def rms(norm, x):  # Gemma's RMSNorm, (1 + w)
        x = x.double()
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + norm.eps) * (1 + norm.weight.double())

    for layer, theta in ((0, 100.0), (1, 10000.0)):
        block = model.base_model.layers[layer]
        attention = block.self_attn
        with torch.no_grad():
            q = attention.q_proj(rms(block.input_layernorm, out.hidden_states[layer][0]).float())
            q = rms(attention.q_norm, q.view(T, 4, 8)).transpose(0, 1)  # (nh, T, hs)
        np.testing.assert_allclose(rec.queries_keys[layer].q, rope(q, theta, 8).numpy(), atol=1e-5)
        other = 10000.0 if theta == 100.0 else 100.0
        assert not np.allclose(rec.queries_keys[layer].q, rope(q, other, 8).numpy(), atol=1e-3)  # the base matters
        assert rec.queries_keys[layer].scale == pytest.approx(20 ** -0.5)
    assert "10000 on full-attention layers, 100 on sliding-attention layers" in loaded.model.config.position_note


def test_gemma3_multimodal_and_bidirectional_folders_are_refused_in_one_sentence(folders, tmp_path):
    import shutil

    for name, edit, expected in (
            ("vision", {"model_type": "gemma3"}, "is a Gemma 3 image-and-text model, which the lab does not read"),
            ("embedding", {"use_bidirectional_attention": True}, "attends in both directions")):
        folder = tmp_path / name
        shutil.copytree(folders["gemma3_text"], folder)
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, **edit}))
        with pytest.raises(CheckpointError) as refused:
            load(folder)
        message = str(refused.value)
        assert expected in message and "\n" not in message and message.endswith(".")


def test_a_soft_capped_output_is_read_as_the_model_reads_it(tmp_path):
    """final_logit_softcapping (Gemma 2's; a Gemma 3 config may set it): logits = cap tanh(z / cap). The lens's last
    row and causal tracing's clean probability are transformers' own capped output; direct attribution splits the
    logit before the cap (lm_head(norm(x))) and its sentence says so, with the capped value."""
    require_hf_extra()
    from bench.hf_folders import decoder_folder

    folder = decoder_folder(tmp_path / "capped", "gemma3_text", final_logit_softcapping=2.0)
    loaded = load(folder)
    tokenized = loaded.tokenizer.tokenize(TEXT)
    rec = trace(loaded.model, tokenized.ids, tokenized.tokens, activations=True)
    model, out = reference(folder, tokenized.ids)
    assert out.logits.abs().max() < 2.0  # capped
    with torch.no_grad():
        z = model.lm_head(out.hidden_states[-1][0, -1])  # hidden_states[-1]: after the final norm
    np.testing.assert_allclose(2.0 * torch.tanh(z / 2.0).numpy(), out.logits[0, -1].numpy(), atol=1e-6)
    answer = int(out.logits[0, -1].argmax())
    lens = wf.logit_lens(loaded.model, loaded.tokenizer, rec, answer)
    np.testing.assert_allclose(lens.probs_last[-1], torch.softmax(out.logits[0, -1].double(), -1).numpy(), atol=1e-6)
    attribution = wf.direct_attribution(loaded.model, rec, answer)
    assert attribution.logit == pytest.approx(float(z[answer]), abs=1e-5)
    assert attribution.total == pytest.approx(float(z[answer]), abs=1e-4)
    assert attribution.capped == pytest.approx(float(out.logits[0, -1, answer]), abs=1e-6)
    assert (f"before the model's soft cap (2 tanh(logit / 2) = {attribution.capped:.2f}) is {attribution.logit:.2f}, "
            "the sum of the pieces") in attribution.sentence()
    q = wf.Question(question=TEXT, ids=tokenized.ids, tokens=tokenized.tokens, raw=tokenized.tokens, name="",
                    name_positions=[2], answer_id=answer, answer_piece="", truth=None, own_answer=True)
    traced = wf.causal_trace(loaded.model, loaded.tokenizer, q, corruption="noise", samples=1, seed=0)
    assert traced.clean == pytest.approx(torch.softmax(out.logits[0, -1].double(), -1)[answer].item(), abs=1e-6)


def test_gemma2_soft_caps_its_scores_and_the_query_key_view_shows_the_cap(folders):
    """Gemma 2: scores = cap * tanh(q k^T * scale / cap) before the mask (cap 2 here, 50 in the released models):
    the recorded cap is the config's, the attention rebuilt with it is transformers' own, without it it is not, and
    the query-key view's steps apply it and end at the head view's weight."""
    from core.lens import query_key as qk

    loaded, tokenized = opened(folders, "gemma2")
    rec = trace(loaded.model, tokenized.ids, tokenized.tokens, queries_keys=True)
    _, out = reference(folders["gemma2"], tokenized.ids)
    for layer in range(2):
        record = rec.queries_keys[layer]
        assert record.softcap == 2.0 and record.scale == pytest.approx(20 ** -0.5)
        assert np.abs(rebuilt(rec, layer) - out.attentions[layer][0].numpy()).max() <= TOL
        assert np.abs(rebuilt(rec, layer, capped=False) - out.attentions[layer][0].numpy()).max() > 1e-2
    query = len(tokenized.ids) - 1
    row = qk.decompose(rec.queries_keys[1], rec.allowed[query], 1, 2, query)
    key = row.best_key()
    steps = qk.weight_steps(row, key)
    scaled = float(row.dots[key] * row.scale)
    assert steps[2].what == "soft cap 2·tanh(x / 2)" and steps[2].value == pytest.approx(2 * np.tanh(scaled / 2))
    assert steps[-1].value == pytest.approx(float(rec.attention[1, 2, query, key]), abs=1e-6)
    gemma3, tokenized = opened(folders, "gemma3_text")  # Gemma 3's attention applies no cap, whatever its config says
    assert all(r.softcap is None for r in trace(gemma3.model, tokenized.ids, queries_keys=True).queries_keys)


def test_the_attention_page_draws_a_soft_capped_gemma2(folders, monkeypatch):
    from tests.test_attention_page import array, assert_no_exception, charts, open_page

    at = open_page(monkeypatch, folders["llama"].parent, model="gemma2", text=TEXT)
    loaded, tokenized = opened(folders, "gemma2")
    _, out = reference(folders["gemma2"], tokenized.ids)
    at.selectbox(key="attn_layer").select(1)
    at.selectbox(key="attn_head").select(3).run()
    z = array(charts(at)[0]["data"][0]["z"])
    shown = ~np.isnan(z)
    assert np.abs(z[shown] - out.attentions[1][0, 3].numpy()[shown]).max() <= TOL
    at.radio(key="attn_view").set_value("qk").run()
    assert_no_exception(at)
    assert "soft cap 2·tanh(x / 2)" in " ".join(c.value for c in at.code)


def test_phi3_longrope_as_phi_3_5_and_phi_4_mini_configure_it(tmp_path):
    """Phi-3.5-mini and Phi-4-mini scale their rotary with 'longrope' (per-frequency short factors below
    original_max_position_embeddings, and cos/sin multiplied by sqrt(1 + ln(s) / ln(original))): the lab reads the
    (cos, sin) the layer was given, so its attention and query-key rebuild are still transformers' own."""
    require_hf_extra()
    from bench.hf_folders import decoder_folder

    rope = {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
            "short_factor": [1.0, 3.0], "long_factor": [2.0, 5.0]}
    folder = decoder_folder(tmp_path / "phi3-longrope", "phi3", rope_parameters=rope, max_position_embeddings=256,
                            original_max_position_embeddings=64)
    loaded = load(folder)
    tokenized = loaded.tokenizer.tokenize(TEXT)
    rec = trace(loaded.model, tokenized.ids, tokenized.tokens, queries_keys=True)
    model, out = reference(folder, tokenized.ids)
    assert model.config.rope_parameters["rope_type"] == "longrope"
    assert np.abs(rec.attention - torch.stack(out.attentions)[:, 0].numpy()).max() <= TOL
    for layer in range(2):
        assert np.abs(rebuilt(rec, layer) - rec.attention[layer]).max() <= TOL
    assert not np.allclose(rec.attention, trace(load(decoder_folder(tmp_path / "plain", "phi3")).model, tokenized.ids)
                           .attention, atol=1e-3)  # the scaling changes the maps: it is really exercised


def test_a_gemma_with_a_bias_inside_its_normed_attention_output_refuses_the_lens_in_one_sentence(tmp_path):
    """attention_bias with Gemma's post-attention norm: the bias is scaled per position by the norm, so it is no
    constant share (Activations.attn_bias): the lens and patching refuse, attention and query-key still work."""
    require_hf_extra()
    from bench.hf_folders import decoder_folder

    loaded = load(decoder_folder(tmp_path / "biased", "gemma3_text", attention_bias=True))
    tokenized = loaded.tokenizer.tokenize(TEXT)
    rec = trace(loaded.model, tokenized.ids, tokenized.tokens, activations=True, queries_keys=True)
    assert np.abs(rebuilt(rec, 1) - rec.attention[1]).max() <= TOL
    with pytest.raises(wf.WhereFromError, match="output projection's bias inside"):
        wf.logit_lens(loaded.model, loaded.tokenizer, rec, 0)
    assert not wf.patchable(loaded.model)
