"""Client-side pacing as pure logic: ``wait_before_send`` with fixed inputs and as a
property (admitting only sends whose wait is 0 never puts more than ``limit`` sends in any
window, and the wait is exactly long enough), and the Pacer with an injected clock and
sleep: two tasks share its windows, creates have their own limit, and a plain call never
waits behind a create. The same pacer against the sandbox is in test_client.py."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.client._pacing import Pacer, wait_before_send


def most_in_any_window(times: list[float], window: float) -> int:
    """The largest number of ``times`` inside any half-open window ``(t - window, t]``
    (a fullest window can always be slid until a send sits on its right edge)."""
    return max((sum(1 for u in times if t - window < u <= t) for t in times), default=0)


class FakeTime:
    """A clock that moves only when a task sleeps; ``gate`` (when set up) holds sleepers
    until the test opens it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.gate: asyncio.Event | None = None

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        deadline = self.now + seconds
        if self.gate is not None:
            await self.gate.wait()
        self.now = max(self.now, deadline)


# -- wait_before_send: fixed inputs -------------------------------------------------------


@pytest.mark.parametrize(("sends", "now", "limit", "expected"), [
    ([], 0, 1, 0),  # nothing sent yet
    ([0, 1], 2, 3, 0),  # room left
    ([0, 10, 20], 30, 3, 30),  # full: wait until the send at 0 leaves (0 + 60 - 30)
    ([0, 10, 20, 30, 40], 45, 3, 35),  # over-full log (limits lowered): the 3rd newest must leave
    ([0], 60, 1, 0),  # a send exactly one window ago has left (the window is (now - 60, now])
    ([0], 59.5, 1, 0.5),
    ([-100, -61, 0], 0, 2, 0),  # sends older than the window do not count
    ([5, 5, 5], 5, 3, 60),  # three at once: the next waits a whole window
])
def test_wait_before_send_fixed_inputs(sends, now, limit, expected):
    assert wait_before_send(sends, now, limit, 60) == pytest.approx(expected)


def test_wait_before_send_refuses_a_limit_below_one():
    with pytest.raises(ValueError, match="limit must be 1 or more"):
        wait_before_send([], 0, 0, 60)


# -- wait_before_send: properties -----------------------------------------------------------

limits = st.integers(min_value=1, max_value=8)
windows = st.integers(min_value=1, max_value=200)
gaps = st.lists(st.integers(min_value=0, max_value=80), min_size=1, max_size=120)


def admitted(gaps: list[int], limit: int, window: int) -> list[int]:
    """Sends at the times the gaps lead to, each admitted only when its wait is 0."""
    sends: list[int] = []
    now = 0
    for gap in gaps:
        now += gap
        if wait_before_send(sends, now, limit, window) == 0:
            sends.append(now)
    return sends


@settings(max_examples=300, deadline=None)
@given(gaps, limits, windows)
def test_admitting_only_at_wait_zero_never_overfills_a_window(gaps, limit, window):
    sends = admitted(gaps, limit, window)
    assert most_in_any_window(sends, window) <= limit


@settings(max_examples=300, deadline=None)
@given(gaps, limits, windows, st.integers(min_value=0, max_value=300))
def test_the_wait_is_exactly_long_enough(gaps, limit, window, later):
    sends = admitted(gaps, limit, window)
    now = sends[-1] + later
    wait = wait_before_send(sends, now, limit, window)
    assert 0 <= wait <= window, "never longer than one window"
    assert wait_before_send(sends, now + wait, limit, window) == 0, "after the wait the send fits"
    assert most_in_any_window([*sends, now + wait], window) <= limit
    if wait > 0:
        assert wait_before_send(sends, now + wait - 1, limit, window) > 0, "any earlier would not fit"


# -- the Pacer with an injected clock and sleep ---------------------------------------------


async def test_two_tasks_share_the_windows_and_wait_no_longer_than_needed():
    t = FakeTime()
    pacer = Pacer(120, 60, margin=0, clock=t.clock, sleep=t.sleep)
    calls: list[float] = []
    creates: list[float] = []

    async def run(n: int) -> None:
        for i in range(n):
            create = i % 3 == 0
            await pacer.acquire(create=create)
            calls.append(t.now)
            if create:
                creates.append(t.now)

    await asyncio.gather(run(150), run(150))
    assert len(calls) == 300 and len(creates) == 100
    assert most_in_any_window(calls, 60) <= 120 and most_in_any_window(creates, 60) <= 60
    assert calls[:120] == [0.0] * 120, "no wait while the window has room"
    assert calls[120] == 60.0, "the 121st waits exactly until the first leaves"
    assert t.now == 120.0, "300 calls need three windows, and no more"


async def test_creates_have_their_own_limit():
    t = FakeTime()
    pacer = Pacer(120, 60, clock=t.clock, sleep=t.sleep)
    for _ in range(60):
        assert await pacer.acquire(create=True) == 0
    assert await pacer.acquire(create=True) == pytest.approx(60.02), "the 61st create waits (window + margin)"
    assert t.now == pytest.approx(60.02)


async def test_a_call_never_waits_behind_a_waiting_create():
    t = FakeTime()
    pacer = Pacer(120, 2, clock=t.clock, sleep=t.sleep)
    await pacer.acquire(create=True)
    await pacer.acquire(create=True)
    t.gate = asyncio.Event()
    blocked = asyncio.create_task(pacer.acquire(create=True))
    await asyncio.sleep(0)
    assert t.sleeps == [pytest.approx(60.02)] and not blocked.done(), "the 3rd create waits"
    assert await asyncio.wait_for(pacer.acquire(), timeout=1) == 0, "a plain call passes at once"
    assert t.now == 0 and not blocked.done()
    t.gate.set()
    assert await blocked == pytest.approx(60.02)


async def test_limits_are_configurable():
    t = FakeTime()
    pacer = Pacer(5, 2, window=10, margin=0, clock=t.clock, sleep=t.sleep)
    for _ in range(5):
        await pacer.acquire()
    assert await pacer.acquire() == 10, "the 6th call of a 5-per-10 s pacer waits 10 s"
    pacer.configure(calls_per_minute=7)
    for _ in range(6):
        await pacer.acquire()
    assert t.now == 10, "raised to 7: six more fit beside the one already sent"
    assert await pacer.acquire() == 10
    with pytest.raises(ValueError, match="1 or more"):
        pacer.configure(creates_per_minute=0)
    assert pacer.creates.limit == 2, "a refused change leaves the limit as it was"


async def test_delay_tells_the_wait_without_taking_a_place():
    t = FakeTime()
    pacer = Pacer(120, 2, clock=t.clock, sleep=t.sleep)
    assert pacer.delay(create=True) == 0
    await pacer.acquire(create=True)
    await pacer.acquire(create=True)
    assert pacer.delay(create=True) == pytest.approx(60.02) and pacer.delay() == 0
    assert pacer.delay(create=True) == pytest.approx(60.02), "asking twice records nothing"
    t.now = 30
    assert pacer.delay(create=True) == pytest.approx(30.02)


async def test_a_slot_counts_from_when_the_answer_came_back_and_as_now_while_in_flight():
    t = FakeTime()
    pacer = Pacer(2, 2, window=10, margin=0, clock=t.clock, sleep=t.sleep)
    async with pacer.slot() as waited:
        assert waited == 0
        t.now = 3.0  # the answer takes 3 s: the service may have counted the call as late as 3.0
    async with pacer.slot():
        t.now = 4.0
    async with pacer.slot() as waited:
        assert waited == 10 - 1.0 and t.now == 13.0, "the 3rd waits until the 1st's answer (3.0) is 10 s old"
    # While a send is in flight it counts as sent "now": its answer may still be to come.
    second = Pacer(1, 1, window=10, margin=0, clock=t.clock, sleep=t.sleep)
    async with second.slot():
        assert second.calls.wait(t.now + 100) == 10, "one in flight fills a 1-per-window pacer at any time"
    assert second.calls.wait(t.now + 10) == 0, "settled: it leaves the window 10 s after its answer"


async def test_configure_changes_the_window_and_refuses_a_bad_one():
    t = FakeTime()
    pacer = Pacer(1, 1, window=60, margin=0, clock=t.clock, sleep=t.sleep)
    pacer.configure(window=2)
    await pacer.acquire()
    assert await pacer.acquire() == 2
    with pytest.raises(ValueError, match="longer than 0"):
        pacer.configure(window=0)
    assert pacer.calls.seconds == 2
