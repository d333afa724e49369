"""Queue sets from Python: elements as writable memoryviews in place, with blocks,
blocking pulls and iteration, depth limits, and two processes passing elements."""

import ctypes
import gc
import multiprocessing
import time

import pytest

import shoal


def make(store, **kw):
    return store.queues("jobs", 64, 8, queues=["work", "done"], limits={"done": 2}, **kw)


def test_elements_are_written_in_place_and_seen_by_the_next_holder(store):
    qs = make(store)
    free, work = qs.queue("free"), qs.queue("work")
    assert qs.queue_names == ["free", "work", "done"]
    assert (qs.element_size, qs.elements, qs.len(free)) == (64, 8, 8)
    e = qs.pull(free)
    assert e.index == 0 and e.from_queue == free and not e.redelivered and len(e) == 64
    view = e.data
    assert isinstance(view, memoryview) and not view.readonly and len(view) == 64
    view[0:5] = b"hello"
    qs.push(work, e)
    with pytest.raises(ValueError):
        view[0]  # released with the push: the bytes are no longer this process's
    with pytest.raises(shoal.InvalidArgument):
        e.index
    other = store.queues("jobs")
    got = other.pull(work)
    assert got.index == 0 and bytes(got.data[0:5]) == b"hello"
    assert qs.stats(work)["pulls"] == 1


def test_with_gives_an_element_back_and_push_to_sends_it_on(store):
    qs = make(store)
    free, work = qs.queue("free"), qs.queue("work")
    with qs.pull(free) as e:
        e.data[0] = 7
    assert qs.len(free) == 8
    with qs.pull(free) as e:
        e.push_to(work)
    assert (qs.len(free), qs.len(work)) == (7, 1)
    e = qs.pull(work)
    e.keep()  # held by this process, with no object for it
    assert qs.held() and qs.held()[0][1] == 1


def test_no_buffer_of_an_element_outlives_its_push(store):
    qs = make(store)
    free, work = qs.queue("free"), qs.queue("work")
    e = qs.pull(free)
    head = e.data[0:4]  # a slice shares the view's buffer, and outlives its release
    head[0:4] = b"abcd"
    with pytest.raises(BufferError):
        qs.push(work, e)
    assert e.index == 0 and qs.len(work) == 0  # still held, nothing moved
    del head
    qs.push(work, e)
    got = qs.pull(work)
    assert got.index == 0 and bytes(got.data[0:4]) == b"abcd"
    got.keep()

    e = qs.pull(free)
    arr = (ctypes.c_char * 64).from_buffer(e.data)  # an object made over the bytes
    with pytest.raises(BufferError):
        e.release()
    with pytest.raises(BufferError):
        qs.push_many(work, [e])
    with pytest.raises(BufferError):
        e.keep()
    del arr
    with memoryview(e) as m:  # the element is a buffer itself
        m[0] = 9
        with pytest.raises(BufferError):
            e.release()
    qs.push(work, e)
    got = qs.pull(work)
    assert got.index == 1 and got.data[0] == 9


def test_an_element_whose_buffers_are_gone_goes_back_when_dropped(store):
    qs = make(store)
    free = qs.queue("free")
    tail = qs.pull(free).data[60:64]  # keeps the element, which keeps its set
    assert qs.len(free) == 7
    gc.collect()
    assert qs.len(free) == 7
    del tail  # the last reference: the element is dropped, and given back
    assert qs.len(free) == 8
    e = qs.pull(free)
    view = e.data
    assert e.data is view
    del e, view  # no cycle between an element and its view
    assert qs.len(free) == 8


def test_batches_limits_moves_and_timeouts(store):
    qs = make(store)
    free, work, done = qs.queue("free"), qs.queue("work"), qs.queue("done")
    three = qs.pull_many(free, 3)
    assert [e.index for e in three] == [0, 1, 2]
    with pytest.raises(shoal.QueueFull):
        qs.push_many(done, three)
    assert all(e.index >= 0 for e in three)  # still held
    qs.push_many(work, three)
    assert qs.move(work, done, 10) == 2
    with pytest.raises(shoal.InvalidArgument):
        qs.push_many(work, [qs.pull(free)] * 2)
    t = time.monotonic()
    last = qs.pull_wait(work, 0.05)
    assert last is not None
    last.keep()
    assert qs.pull_wait(work, 0.05) is None
    assert time.monotonic() - t >= 0.05
    assert qs.pull_any([work, done], 1.0).from_queue == done
    assert qs.reclaim() == 0
    with pytest.raises(shoal.InvalidArgument):
        qs.pull(9)
    with pytest.raises(shoal.InvalidArgument):
        store.map("jobs")
    with pytest.raises(shoal.NotFound):
        store.queues("none")


def test_iteration_blocks_until_the_timeout(store):
    qs = make(store)
    free, work = qs.queue("free"), qs.queue("work")
    for e in qs.pull_many(free, 3):
        e.data[0] = e.index
        e.push_to(work)
        e.release()
    seen = []
    for e in qs.iter(work, timeout=0.05):
        seen.append(e.data[0])
        e.keep()
    assert seen == [0, 1, 2]


def _producer(path, n):
    store = shoal.open(path)
    qs = store.queues("jobs")
    free, work = qs.queue("free"), qs.queue("work")
    for i in range(n):
        e = qs.pull_wait(free, 30)
        e.data[0:4] = i.to_bytes(4, "little")
        qs.push(work, e)
    store.close()


def test_two_processes_pass_elements(store, path):
    qs = make(store)
    free, work = qs.queue("free"), qs.queue("work")
    ctx = multiprocessing.get_context("spawn")
    p = ctx.Process(target=_producer, args=(path, 50))
    p.start()
    got = []
    for _ in range(50):
        e = qs.pull_wait(work, 60)  # woken by the other process's push
        assert e is not None
        got.append(int.from_bytes(e.data[0:4], "little"))
        e.push_to(free)
        e.release()
    p.join(60)
    assert p.exitcode == 0
    assert got == list(range(50))
