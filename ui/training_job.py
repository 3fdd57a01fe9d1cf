"""The Training curves page's "Train" button: one small recipe trained in its own process (core.train.job), its
live log followed by the curves above, its progress and a Stop button. One job per server; off where the
operator turned training off (ATTENTION_LAB_TRAINING, off under `make serve` unless set to 1). Not a page.
"""

from __future__ import annotations

import streamlit as st

from core.io.snapshots import written_steps as snapshots_written
from core.lens.history.logs import catalog
from core.text import markdown_escape as plain
from core.train import job as jobs

REFRESH_SECONDS = 1.0


@st.cache_resource
def job_slot() -> jobs.JobSlot:
    """The server's one slot (shared by every session)."""
    return jobs.JobSlot()


def run_sources(known: dict) -> dict:
    """The runs the Train button wrote (their checkpoints and live logs), for the curves page's run list."""
    from core.io.checkpoint import list_checkpoints

    folder = jobs.runs_dir()
    if not folder.is_dir():
        return {}
    found = catalog([(i.name, i.path) for i in list_checkpoints(folder) if not i.error], [folder])
    found = {name: source for name, source in found.items() if name not in known}
    follow = st.session_state.get("train_follow")
    if follow in found and follow not in st.session_state.get("curves_runs", []):  # before the Runs box is drawn
        st.session_state["curves_runs"] = [*st.session_state.get("curves_runs", []), follow]
        st.session_state["curves_metric"] = "loss"  # every recipe's log has it (the page opened on accuracy, issue 63)
        st.session_state.pop("train_follow")
    return found


OWNER_KEY = "train_owner"  # this browser session's token: the job it started is its own


def session_token() -> str:
    import uuid

    return st.session_state.setdefault(OWNER_KEY, uuid.uuid4().hex)


def is_mine(job: jobs.TrainingJob) -> bool:
    return not job.owner or job.owner == session_token()


def _start(recipe: str) -> None:
    try:
        started = job_slot().start(recipe, owner=session_token())
    except jobs.JobError as exc:
        st.session_state["train_note"] = str(exc)
        return
    st.session_state.pop("train_note", None)
    st.session_state["train_follow"] = f"{started.path.stem} (log)"  # added to the runs once its log is there
    st.session_state["train_was_running"] = True


def _stop() -> None:
    job_slot().stop(owner=session_token())


def show_training_job() -> None:
    """The button (where training is allowed), and while a job runs its progress and Stop."""
    if not jobs.training_allowed():
        return
    st.subheader("Train")
    slot = job_slot()
    running = slot.current() is not None and slot.current().running()  # anyone's: one job per server
    left, right = st.columns([3, 2])
    recipe = left.selectbox("Recipe", list(jobs.SMALL_RECIPES), key="train_recipe", disabled=running,
                            help="A small bundled recipe, trained again in its own process into "
                                 f"{jobs.runs_dir().name}/ (never over a bundled checkpoint).")
    right.button("Train", key="train_start", disabled=running, on_click=_start, args=(recipe,), type="primary")
    if st.session_state.get("train_note"):
        st.info(plain(st.session_state["train_note"]))
    if slot.current() is not None:
        st.fragment(_progress, run_every=REFRESH_SECONDS if running else None)()


def _progress() -> None:
    job = job_slot().current()
    if job is None:
        return
    step, total = jobs.progress(job)
    alive = job.running()
    mine = is_mine(job)
    if mine and st.session_state.get("train_follow") and job.log.exists():
        st.rerun(scope="app")  # its log is there: the curves above follow it
    kept = snapshots_written(job.path)
    kept_line = f"; snapshots written at steps {', '.join(f'{s:,}' for s in kept)}" if kept else ""
    whose = "" if mine else " (started in another browser session)"
    if alive:
        st.progress(min(step / max(total, 1), 1.0),
                    text=plain(f"{job.path.stem}{whose}: step {step:,} of {total:,}{kept_line}"))
        if mine:
            st.button("Stop", key="train_stop", on_click=_stop)
        else:  # one job per server: this session sees it run, and that it is not its own to stop
            st.caption(plain(f"One job trains at a time on this server; this one is another session's, so it has no "
                             f"Stop here, and Train is free again when it ends. Its log is {job.log.name}, in the "
                             "Runs box above."))
        return
    code = job.process.returncode
    said = "finished" if step >= total else ("stopped" if code in (0, -15, -9) else f"failed (exit {code})")
    st.caption(plain(f"{job.path.stem}{whose}: {said} at step {step:,} of {total:,}; its log, snapshots and "
                     f"checkpoint are in {jobs.runs_dir()}."))
    if st.session_state.get("train_was_running", True):
        st.session_state["train_was_running"] = False
        st.rerun(scope="app")  # the job ended: the page stops refreshing
