"""Issue 53 in a real browser at 1024x768: a Hugging Face Trainer folder's saved steps are squares on its loss
curve, and a click on one opens the Attention page on that checkpoint.

One server of its own, its checkpoints folder holding a tiny checkpoint and a Trainer output folder (tiny GPT-2
checkpoints made with transformers, trainer_state.json by TrainerState.save_to_json). Screenshots land in
test-artifacts/browser/issue53-*.png.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser.conftest import (
    ARTIFACTS,
    WAIT_MS,
    browser_page,
    open_page,
    screenshot,
    start_server,
    stop,
    wait_idle,
)
from tests.conftest import require_hf_extra, save_tiny_checkpoint
from tests.test_run_sources_page import trainer_folder

pytestmark = pytest.mark.browser

SMALL = {"width": 1024, "height": 768}
# The pixel centre of each point of the chart's "saved" trace, from plotly's own axes (page coordinates)
SAVED_POINTS_JS = """() => {
    const gd = document.querySelector('.js-plotly-plot');
    const i = gd.data.findIndex(t => t.meta && (t.meta.kind === 'saved' || (t.meta[0] || {}).kind === 'saved'));
    if (i < 0) return null;
    const box = gd.getBoundingClientRect(), L = gd._fullLayout, s = L._size;
    const xs = Array.from(gd.data[i].x), ys = Array.from(gd.data[i].y);
    return xs.map((x, k) => ({x: box.left + s.l + L.xaxis.l2p(x), y: box.top + s.t + L.yaxis.l2p(ys[k]),
                              step: gd.data[i].customdata[k][1]}));
}"""


HOVER_JS = "() => Array.from(document.querySelectorAll('.hovertext')).map(e => e.textContent).join(' ')"


@pytest.fixture(scope="module")
def trainer_server(chromium, tmp_path_factory) -> Iterator:
    require_hf_extra()
    folder = tmp_path_factory.mktemp("issue53") / "ckpts"
    folder.mkdir()
    save_tiny_checkpoint(folder / "tiny-lm.safetensors", "lm")
    trainer_folder(folder / "out")
    server = start_server(folder, ARTIFACTS / "server-issue53.log")
    try:
        yield server
    finally:
        stop(server.process)


def test_a_click_on_a_saved_step_opens_that_checkpoint_on_the_attention_page(trainer_server, browser):
    with browser_page(browser, SMALL) as page:
        open_page(page, trainer_server.url + "/curves?runs=ckpts/out&metric=loss&x=step&smoothing=0")
        points = page.evaluate(SAVED_POINTS_JS)
        assert points and [p["step"] for p in points] == [5, 10], points
        screenshot(page, "issue53-saved-steps")
        page.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
        points = page.evaluate(SAVED_POINTS_JS)  # where they are after the scroll
        # a hand's click, a pixel or two off the square's centre (at the exact centre the training line's own
        # point, under the square, ties with it for plotly's hover)
        x, y = points[0]["x"] + 2, points[0]["y"] + 2
        page.mouse.move(x, y)
        page.wait_for_timeout(500)
        assert "saved at step 5" in page.evaluate(HOVER_JS)
        page.mouse.click(x, y)
        for _ in range(120):  # st.switch_page changes the URL in place (history API): poll it
            if "/attention" in page.url:
                break
            page.wait_for_timeout(500)
        screenshot(page, "issue53-after-click")
        # the checkpoint's first load (transformers, then the lab's hooks) on a busy 2-core box: once a full run
        # waited past the default minute at "Loading model…"
        wait_idle(page, timeout_ms=4 * WAIT_MS)
        query = parse_qs(urlparse(page.url).query)
        assert query["model"] == ["ckpts/out @ step 5"], page.url
        assert page.get_by_role("combobox", name="Checkpoint", exact=True).input_value() == "ckpts/out @ step 5"
        assert page.locator('[data-testid="stException"]').count() == 0
        screenshot(page, "issue53-attention-at-step-5")
