"""The asyncio form against a real daemon: a slow consumer behind a small buffer loses nothing."""
import asyncio
import json

import pytest

from checkoutbus import AsyncSubscriber, FileCursor, SubscriberError

from bus import needs_daemon, tool, wait_for

pytestmark = needs_daemon


def test_async_for_with_a_stalled_consumer_recovers_every_drop(bus):
    daemon = bus.daemon("--publish-hwm", "2000", "--heartbeat-ms", "100")
    path = bus.path("cursor")

    async def main():
        sub = AsyncSubscriber(publish=daemon.publish, control=daemon.control, cursor=path, name="py-async",
                              receive_hwm=1, receive_buffer=4096, buffer=8)
        async with sub:
            await sub.wait_subscribed()
            flood = await asyncio.create_subprocess_exec(
                tool("checkoutbus"), "flood", "--json", "--to", daemon.ingest, "--from", daemon.publish,
                "--checkouts", "3000", stdout=asyncio.subprocess.PIPE)
            seqs, last_seq = [], None
            async for envelope in sub:
                if not seqs:  # the slow consumer: busy with the first envelope until the flood is done
                    out, _ = await flood.communicate()
                    # (its own live-only subscriber may lose at this publish HWM on a loaded machine)
                    sent = json.loads(out)["sent"]
                    wait_for(lambda: daemon.stats()["counters"]["received"] == sent, 60, "every event taken in")
                    last_seq = daemon.stats()["last_seq"]
                seqs.append(envelope.seq)
                sub.commit(envelope)
                if envelope.seq == last_seq:
                    break
            return seqs, last_seq, sub.statistics

    seqs, last_seq, statistics = asyncio.run(asyncio.wait_for(main(), 120))
    assert seqs == list(range(1, last_seq + 1))
    assert statistics.missed > 0 and statistics.recovered == statistics.missed
    assert FileCursor.committed(path) == last_seq
    reported = daemon.report_of("py-async", until=lambda r: r["last_seq"] == last_seq)
    assert reported["missed"] == statistics.missed


def test_cancelling_the_iterating_task_stops_the_thread_and_frees_the_cursor(bus):
    daemon = bus.daemon("--heartbeat-ms", "100")
    path = bus.path("cursor")

    async def main():
        sub = AsyncSubscriber(publish=daemon.publish, control=daemon.control, cursor=path, name="py-cancel")

        async def consume():
            async with sub:
                async for envelope in sub:
                    sub.commit(envelope)

        task = asyncio.ensure_future(consume())
        await sub.wait_subscribed()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        assert not sub._thread.is_alive()

    asyncio.run(asyncio.wait_for(main(), 30))
    FileCursor(path).close()  # the lock was released: the file can be taken again
    daemon.report_of("py-cancel")


def test_an_error_on_the_thread_reaches_wait_subscribed_and_the_iteration(bus):
    daemon = bus.daemon("--heartbeat-ms", "100")
    path = bus.path("cursor")
    taken = FileCursor(path)  # another subscriber holds the cursor file

    async def main():
        sub = AsyncSubscriber(publish=daemon.publish, control=daemon.control, cursor=path)
        with pytest.raises(SubscriberError) as refused:
            await sub.wait_subscribed()
        assert refused.value.kind == "cursor_in_use"
        with pytest.raises(SubscriberError):
            async for _ in sub:
                pass
        await sub.aclose()

    try:
        asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        taken.close()
