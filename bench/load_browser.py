"""The load test's `--client browser` sessions: Playwright contexts in one headless Debian Chromium."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

from bench.browser_driver import CHARTS_JS, CHROMIUM_ARGS, IDLE_JS, VIEWPORT
from bench.load_servers import Sampler
from bench.load_stats import Stats, sentence
from ui import APP_PAGES


async def wait_drawn(page, timeout_ms: int, previous_h1: str | None = None, charts_before: str | None = None
                     ) -> None:
    if charts_before is not None:
        await page.wait_for_function(f"(before) => ({CHARTS_JS})() !== before", arg=charts_before,
                                     timeout=timeout_ms)
    if previous_h1 is not None:
        await page.wait_for_function(
            """(before) => { const h = document.querySelector('[data-testid="stMain"] h1');
                             return h && h.innerText !== before; }""", arg=previous_h1, timeout=timeout_ms)
    await page.wait_for_function(IDLE_JS, timeout=timeout_ms)


async def h1_text(page) -> str:
    return await page.evaluate("""() => { const h = document.querySelector('[data-testid="stMain"] h1');
                                          return h ? h.innerText : ''; }""")


async def session(number: int, browser, url: str, pages: list[tuple[str, str, bool]], deadline: float,
                  stats: Stats, timeout_ms: int, ready: asyncio.Event, first_path: str = "attention") -> None:
    rng = random.Random(number)
    context = await browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(timeout_ms)
    page = await context.new_page()
    current = "attention"
    try:
        started = time.perf_counter()
        await page.goto(f"{url}/{first_path}", wait_until="domcontentloaded", timeout=timeout_ms)
        if first_path != "attention":
            await wait_drawn(page, timeout_ms)
            await page.goto(f"{url}/attention", wait_until="domcontentloaded", timeout=timeout_ms)
        await page.locator(".js-plotly-plot").first.wait_for(timeout=timeout_ms)
        await wait_drawn(page, timeout_ms)
        stats.times["open"].append(time.perf_counter() - started)
        ready.set()
        while time.monotonic() < deadline:
            kind = "type" if current == "attention" and rng.random() < 0.6 else "switch"
            started = time.perf_counter()
            try:
                if kind == "type":
                    before = await page.evaluate(CHARTS_JS)
                    box = page.get_by_label("Sentence", exact=True)
                    await box.fill(sentence(rng) + f" {number}")
                    await box.press("Control+Enter")
                    await wait_drawn(page, timeout_ms, charts_before=before)
                else:
                    choices = [p for p in pages if Path(p[0]).stem != current]
                    target = "attention" if current != "attention" and rng.random() < 0.5 else \
                        Path(rng.choice(choices)[0]).stem
                    default = next(d for f, _, d in pages if Path(f).stem == target)
                    href = f"{url}/" if default else f"{url}/{target}"
                    previous = await h1_text(page)
                    await page.locator(f'[data-testid="stSidebarNav"] a[href="{href}"]').first.click()
                    await wait_drawn(page, timeout_ms, previous_h1=previous)
                    current = target
                if await page.locator('[data-testid="stException"]').count():
                    raise RuntimeError("an exception box is on the page")
                stats.times[kind].append(time.perf_counter() - started)
            except Exception as exc:  # noqa: BLE001 - every failure counts, the session goes on
                stats.errors.append(f"session {number} {kind} on {current}: {type(exc).__name__}: "
                                    f"{str(exc).splitlines()[0][:160]}")
                await page.goto(f"{url}/attention", wait_until="domcontentloaded", timeout=timeout_ms)
                current = "attention"
                await wait_drawn(page, timeout_ms)
    except Exception as exc:  # noqa: BLE001
        stats.errors.append(f"session {number} crashed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
        ready.set()
    finally:
        await context.close()


# --------------------------------------------------------------------------- browser sessions


async def drive(url: str, sessions: int, duration_s: float, ramp_s: float, timeout_ms: int, chromium: str,
                sampler: Sampler, warm_sessions: int = 1) -> tuple[Stats, dict[str, dict[str, int]]]:
    from playwright.async_api import async_playwright

    pages = [(page.file, page.title, page.default) for page in APP_PAGES]
    stats = Stats()
    memory: dict[str, dict[str, int]] = {}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            # One session per replica for a few seconds first, at once (the proxy spreads them): models loaded
            # and cached (the baseline for "per extra session"), so the measured sessions do not pay for that.
            until = time.monotonic() + 5
            await asyncio.gather(*(session(-n, browser, url, pages, until, Stats(), timeout_ms, asyncio.Event(),
                                           first_path="") for n in range(max(1, warm_sessions))))
            memory["one session"] = sampler.memory_now()
            sampler.start()
            tasks = []
            deadline = time.monotonic() + ramp_s + duration_s
            for number in range(1, sessions + 1):
                tasks.append(asyncio.create_task(session(number, browser, url, pages, deadline, stats, timeout_ms,
                                                         asyncio.Event())))
                await asyncio.sleep(ramp_s / max(sessions, 1))
            await asyncio.gather(*tasks)
            memory["peak under load"] = dict(sampler.peak)
            await asyncio.sleep(2)
            memory["after"] = sampler.memory_now()
        finally:
            await browser.close()
    return stats, memory


