import streamlit as st

from core.io.checkpoint import checkpoint_dir
from core.text import markdown_escape as plain
from ui import APP_PAGES
from ui.browser_tables import records_table
from ui.display import warm_up_chart
from ui.model_picker import PageModels, checkpoint_picker
from ui.shared_caches import NO_CHECKPOINTS, all_checkpoints, checkpoints_folder_note

checkpoint_picker(PageModels("home", ("lm-learned",), "lm"))

st.title("Attention Lab")
st.write("Look inside small transformer models: what each head attends to, what positional "
         "encodings do, how training went, and what a model knows versus makes up.")

# What each page is for, by its title in the navigation (pages.APP_PAGES): the list below is the navigation's, in
# its order, so a page added there and not here is listed with no purpose and fails tests/test_home_page.py.
PAGE_GUIDE = {
    "Home": "this page: what each page is for and which models are loaded.",
    "Attention": "type a sentence, see every head's attention (one head, all heads, one token, mean/max/"
                 "rollout), compare two models, export PNG/SVG/CSV, share the link.",
    "Positional encodings": "sinusoidal, learned, ALiBi and RoPE side by side: the encodings, one sentence "
                            "through models that differ only in them, their training, and train short / "
                            "test long perplexity.",
    "Training curves": "overlay runs' loss, accuracy, perplexity or lr (finished or live), smoothed, "
                       "with best values, CSV export and a shareable link.",
    "Birthplace probe": "what a birthplace model retrieves vs. makes up: answer, candidate places, corpus "
                        "evidence and attention for a name; fabricated names; dev-set errors by evidence.",
    "Errors": "which examples a model gets wrong and how sure it was: the confusion matrix, slices, calibration "
              "and two models side by side for classifiers and birthplace models; documents and tokens for "
              "language models.",
    "Attention playground": "attention by hand, no checkpoint needed: edit keys, values and queries, "
                            "course presets (copy, average), one head vs two heads under noisy keys.",
    "Model anatomy": "parameters per module with the formula next to each count (checkpoint or course "
                     "models), and the causal and padding masks of a typed input.",
    "Representations": "what the hidden states hold, layer by layer: a linear probe per layer against shuffled-label "
                       "(or control-task) and embedding-only baselines, for the birthplace world, a LABEL<TAB>TEXT "
                       "file or token tags; the states drawn in 2-D, a click opening the example on Attention.",
    "Open your model": "bring a CS224N minGPT .params file (with its wiki.txt), a nanoGPT ckpt.pt (with its "
                       "meta.pkl) or a checkpoint of ours, and it joins the model picker; or attention maps "
                       "your own code computed, for the Attention page.",
    "Lesson": "the views kept with each page's \"Add this view to the lesson\": reorder, retitle, add notes, "
              "save or open a lesson file, and present it slide by slide (each slide the live page, notes in a "
              "second tab).",
}
st.markdown("\n".join(f"- **{page.title}**: {PAGE_GUIDE[page.title]}" if page.title in PAGE_GUIDE
                       else f"- **{page.title}**" for page in APP_PAGES))

infos = all_checkpoints()
if not infos:
    note = checkpoints_folder_note(str(checkpoint_dir()))  # a hub cache named as the checkpoints folder
    st.warning(plain(note) if note else NO_CHECKPOINTS.format(folder=checkpoint_dir()))
else:
    st.subheader("Checkpoints")
    rows = [{"name": i.name, "task": i.task or "", "attention": i.config.get("attention", ""),
             "positional": i.config.get("positional", ""), "status": i.error or "ok"} for i in infos]
    # Tall enough for every row (35 px each, plus the header): the default height hid the last one. The rows as
    # Arrow once per listing's content, not on every rerun of every session (ui.browser_tables).
    st.dataframe(records_table(rows), hide_index=True, width="stretch", height=35 * (len(rows) + 1) + 3)

warm_up_chart()  # last: the chart library loads while Home is read
