"""Driving a kdissect TUI app headless in the tests (Textual's pilot): one harness for
every TUI test module instead of a copy each."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from textual.app import App

Body = Callable[[Any, Any], Awaitable[None]]  # (app, pilot) -> the test's steps


async def loaded(app: Any, pilot: Any) -> None:
    """Until the app has read all its input (``app.loaded``; 20 s at most)."""
    for _ in range(400):
        if app.loaded:
            break
        await pilot.pause(0.05)
    await pilot.pause()


async def settle(app: Any, pilot: Any) -> None:
    """Until the detail shows the exchange under the cursor (it follows once the
    cursor rests, decoding big ones off the UI thread): up to 20 s, for a machine busy
    at the end of a long suite (it returns as soon as the detail follows)."""
    for _ in range(1000):
        if app.detail_view is not None and app.detail_view is app.current_view():
            break
        await pilot.pause(0.02)
    await pilot.pause()


def drive(
    app: App[Any], body: Body, size: tuple[int, int] = (120, 40), settled: bool = False
) -> None:
    """Run ``app`` at ``size``, wait until it has loaded (and with ``settled`` until its
    detail follows the cursor), then ``await body(app, pilot)``."""

    async def go() -> None:
        async with app.run_test(size=size) as pilot:
            await loaded(app, pilot)
            if settled:
                await settle(app, pilot)
            await body(app, pilot)

    asyncio.run(go())
