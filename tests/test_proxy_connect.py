"""The bootstrap list under concurrent connections (a unit test of ``Proxy._connect``;
the end-to-end case is test_proxy's bootstrap-list test, where this race was timing-bound)."""

import asyncio

from kdissect.proxy import server
from kdissect.proxy.server import Listener, Proxy

DEAD, LIVE = ("127.0.0.1", 1), ("127.0.0.1", 2)


def test_a_connection_reordering_the_list_does_not_make_another_skip_the_live_broker(monkeypatch):
    """B reaches the live broker (second in the list) and moves it first while A still
    waits for the dead one to refuse; A must go on to the live broker, not the dead one
    again (it did: iterating the list being reordered)."""
    tried: dict[str, list[tuple[str, int]]] = {"A": [], "B": []}
    current = {"who": "B"}

    async def open_connection(host, port, *_, **__):
        who = current["who"]
        tried[who].append((host, port))
        if (host, port) == DEAD:
            # A's refusal comes late: after B has connected and reordered the list
            await asyncio.sleep(0.05 if who == "A" else 0)
            raise ConnectionRefusedError(111, "Connection refused")
        await asyncio.sleep(0.01)
        return who, (host, port)

    monkeypatch.setattr(server, "connect", open_connection)

    async def run():
        proxy = Proxy([DEAD, LIVE])
        listener = Listener(None, [DEAD, LIVE], 0)
        b = asyncio.create_task(proxy._connect(listener, "B"))
        await asyncio.sleep(0.001)  # B has failed on the dead one and awaits the live one
        current["who"] = "A"
        a = asyncio.create_task(proxy._connect(listener, "A"))
        return await a, await b, listener.upstreams

    got_a, got_b, order = asyncio.run(run())
    assert got_b == ("B", LIVE)
    assert tried["A"] == [DEAD, LIVE]
    assert got_a == ("A", LIVE)
    assert order == [LIVE, DEAD]  # the one that answered is tried first from now on
