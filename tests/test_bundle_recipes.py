"""`make checkpoints` trains the bundled birthplace family with the knowledge grid's recipe on this CPU;
`--course` keeps the assignment's recipe exactly and never writes over the bundled files."""

from __future__ import annotations

import pytest

from core.train.bundle import COURSE_FOLDER, FOLDER, RECIPES, course_recipes, recipe_summary
from core.train.knowledge_grid import ROWS
from core.train.recipes import assignment_final_tokens
from core.train.trainer import TrainerConfig

# The assignment's run.py and GPTConfig, written out independently of core/train/bundle.py.
ASSIGNMENT = {
    "pretrain": dict(max_epochs=650, batch_size=128, learning_rate=6e-3, warmup_tokens=512 * 20),
    "finetune": dict(max_epochs=10, batch_size=256, learning_rate=6e-4, warmup_tokens=512 * 20),
    "scratch": dict(max_epochs=75, batch_size=256, learning_rate=6e-4, warmup_tokens=512 * 20),
}
SHAPE = dict(n_layer=4, n_head=8, n_embd=256, block_size=128, dropout=0.1)
BIRTHPLACE = course_recipes()
KNOWLEDGE = [r for r in RECIPES if r.recipe in ("pretrain", "finetune")]


@pytest.mark.parametrize("recipe", BIRTHPLACE, ids=lambda r: r.name)
def test_birthplace_recipes_are_the_assignments(recipe):
    kind = recipe.recipe if "reading_params_path" in recipe.kwargs or recipe.recipe == "pretrain" else "scratch"
    for field, value in ASSIGNMENT[kind].items():
        assert getattr(recipe.trainer, field) == value, (recipe.name, field)
    assert recipe.trainer.decay == "cs224n" and recipe.trainer.schedule == "cosine" and recipe.trainer.lr_decay
    assert recipe.trainer.weight_decay == 0.1 and recipe.trainer.betas == (0.9, 0.95)
    assert recipe.trainer.grad_norm_clip == 1.0 and recipe.trainer.final_tokens == 0  # set from the corpus
    for field, value in SHAPE.items():
        assert getattr(recipe.shape, field) == value, (recipe.name, field)


def test_final_tokens_is_200_pretraining_epochs_unless_chosen():
    assert assignment_final_tokens(TrainerConfig(), 2937, 128).final_tokens == 200 * 2937 * 128
    assert assignment_final_tokens(TrainerConfig(final_tokens=5), 2937, 128).final_tokens == 5


def test_pretraining_does_not_write_650_checkpoints():
    pretrain = next(r for r in BIRTHPLACE if r.recipe == "pretrain")
    saves = sum(1 for e in range(1, 651) if e % pretrain.trainer.save_every == 0)
    assert saves <= 20


def test_other_families_say_their_groups_and_schedule():
    for recipe in RECIPES:
        if recipe not in KNOWLEDGE and recipe.trainer.lr_decay:  # the induction runs keep a constant rate
            assert (recipe.trainer.decay, recipe.trainer.schedule) == ("mingpt", "cosine-clamped"), recipe.name


def test_course_recipes_read_and_write_only_the_course_folder_and_data_world():
    assert [r.name for r in BIRTHPLACE] == [r.name for r in KNOWLEDGE]
    for recipe in BIRTHPLACE:
        assert "level" not in recipe.kwargs and "objective" not in recipe.kwargs  # characters, span corruption
        for value in recipe.kwargs.values():
            if isinstance(value, str) and value.startswith("checkpoints/"):
                assert value.startswith(f"{COURSE_FOLDER}/"), (recipe.name, value)
            if isinstance(value, str) and value.startswith("data/"):
                assert value.startswith("data/world/"), (recipe.name, value)


def test_the_bundled_family_is_the_grid_row_it_was_chosen_from():
    chosen = next(r for r in ROWS if r.name == "bpe2k-lm")
    pretrain = [r for r in KNOWLEDGE if r.recipe == "pretrain"]
    assert {r.shape.attention for r in pretrain} == {"vanilla", "synthesizer"}
    for recipe in KNOWLEDGE:
        assert recipe.kwargs["corpus_path"] == f"{chosen.world}/wiki.txt"
        assert (recipe.kwargs["level"], recipe.kwargs["vocab_size"]) == (chosen.level, chosen.vocab_size)
        shape = {k: v for k, v in recipe.shape.__dict__.items() if k != "attention"}
        assert shape == {k: v for k, v in chosen.shape.__dict__.items() if k != "attention"}
        reads = recipe.kwargs.get("reading_params_path")
        assert reads is None or reads.startswith(f"{FOLDER}/wiki-")
    assert all(r.kwargs["objective"] == chosen.objective for r in pretrain)
    assert next(r for r in pretrain if r.shape.attention == "vanilla").trainer.snapshots > 0


def test_recipe_summary_reads_what_the_file_stores():
    old = {"trainer": '{"learning_rate": 0.004, "lr_decay": true}', "progress": '{"epoch": 10}'}
    assert recipe_summary(old) == "10 ep, lr 0.004, mingpt, cosine-clamped"
    new = {"trainer": '{"learning_rate": 0.006, "decay": "cs224n", "schedule": "cosine"}',
           "progress": '{"epoch": 650}'}
    assert recipe_summary(new) == "650 ep, lr 0.006, cs224n, cosine"


def test_a_grid_row_leaves_no_checkpoint_or_resume_file_behind(tmp_path):
    from core.train.callbacks import resume_path
    from core.train.knowledge_grid import remove_row_files

    kept = tmp_path / "grid.jsonl"
    made = [tmp_path / "r.pretrain.safetensors", tmp_path / "r.finetune.safetensors"]
    for path in [kept, *made, *map(resume_path, made)]:
        path.write_text("x")
    remove_row_files(*made)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.jsonl"]
