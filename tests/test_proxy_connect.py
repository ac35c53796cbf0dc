"""The bootstrap list under concurrent connections (a unit test of ``Proxy._connect``;
the end-to-end case is test_proxy's bootstrap-list test, where this race was timing-bound)."""

import asyncio

from kdissect.proxy import server
from kdissect.proxy.server import Listener, Proxy

DEAD, LIVE = ("127.0.0.1", 1), ("127.0.0.1", 2)


def test_a_connection_reordering_the_list_does_not_make_another_skip_the_live_broker(monkeypatch):
    """B reaches the live broker (second in the list) and moves it first while A still
    waits for the dead one to refuse; A must go on to the live broker, not the dead one
    again (it did: iterating the list being reordered). The steps are ordered by events,
    not by sleeps (a loaded machine reordered sleeps of milliseconds)."""
    import contextvars

    who_is = contextvars.ContextVar[str]("who")  # (wait_for runs the connect in a task)
    tried: dict[str, list[tuple[str, int]]] = {"A": [], "B": []}
    tasks: dict[str, asyncio.Task] = {}

    async def open_connection(host, port, *_, **__):
        who = who_is.get()
        tried[who].append((host, port))
        if (host, port) == LIVE:
            if who == "B":
                await a_waits.wait()  # B answers while A waits on the dead one
            return who, (host, port)
        if who == "A":
            a_waits.set()
            await tasks["B"]  # the refusal comes after B connected and reordered the list
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(server, "connect", open_connection)

    async def run():
        proxy = Proxy([DEAD, LIVE])
        listener = Listener(None, [DEAD, LIVE], 0)

        async def connect_as(who: str):
            who_is.set(who)
            return await proxy._connect(listener, who)

        tasks["B"] = asyncio.create_task(connect_as("B"))
        while tried["B"] != [DEAD, LIVE]:  # B failed on the dead one, awaits the live one
            await asyncio.sleep(0)
        a = asyncio.create_task(connect_as("A"))
        return await a, await tasks["B"], listener.upstreams

    a_waits = asyncio.Event()
    got_a, got_b, order = asyncio.run(run())
    assert got_b == ("B", LIVE)
    assert tried["A"] == [DEAD, LIVE]
    assert got_a == ("A", LIVE)
    assert order == [LIVE, DEAD]  # the one that answered is tried first from now on
