import streamlit as st

from core.checkpoint import checkpoint_dir
from pages.common import NO_CHECKPOINTS, all_checkpoints, checkpoint_picker

checkpoint_picker()

st.title("Attention Lab")
st.write("Look inside small transformer models: what each head attends to, what positional "
         "encodings do, how training went, and what a model knows versus makes up.")

PAGE_GUIDE = {
    "Home": "this page: what each page is for and which models are loaded.",
}
for page, purpose in PAGE_GUIDE.items():
    st.markdown(f"- **{page}**: {purpose}")

infos = all_checkpoints()
if not infos:
    st.warning(NO_CHECKPOINTS.format(folder=checkpoint_dir()))
else:
    st.subheader("Checkpoints")
    rows = [{"name": i.name, "task": i.task or "", "attention": i.config.get("attention", ""),
             "positional": i.config.get("positional", ""), "status": i.error or "ok"} for i in infos]
    st.dataframe(rows, hide_index=True, width="stretch")
