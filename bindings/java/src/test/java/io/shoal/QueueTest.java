package io.shoal;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Queue sets from Java: elements written in place and read by the next holder, FIFO
 * order, depth limits, batches, timeouts, exactly-once pushes across threads, what
 * closing does, and each failure's exception.
 */
class QueueTest {
    private String name;
    private ShoalStore store;

    @BeforeEach
    void open() {
        name = TestStores.name("queues");
        store = Shoal.open(name);
    }

    @AfterEach
    void close() {
        store.close();
        TestStores.remove(name);
    }

    /** 8 elements of 64 bytes; queues free (0), work (1), done (2, at most 2 deep). */
    private ShoalQueueSet make() {
        return store.queueSet("jobs", QueueOptions.of(64, 8).queue("work").queue("done", 2));
    }

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }

    private static byte[] head(Element e, int n) {
        byte[] b = new byte[n];
        e.buffer().get(b);
        return b;
    }

    @Test
    void elementsAreWrittenInPlaceAndSeenByTheNextHolder() {
        try (ShoalQueueSet qs = make(); ShoalQueueSet other = store.queueSet("jobs")) {
            int free = qs.queue("free"), work = qs.queue("work"), done = qs.queue("done");
            assertEquals(List.of(0, 1, 2), List.of(free, work, done));
            assertEquals(8, qs.len(free));
            Element e = qs.pull(free);
            assertEquals(0, e.index());
            assertEquals(free, e.fromQueue());
            assertFalse(e.redelivered());
            assertEquals(64, e.size());
            assertTrue(e.isHeld());
            ByteBuffer b = e.buffer();
            assertTrue(b.isDirect());
            assertEquals(64, b.capacity());
            assertArrayEquals(new byte[64], head(e, 64), "elements start zeroed");
            b.put(ascii("hello"));
            qs.push(work, e);
            assertFalse(e.isHeld());
            assertThrows(ClosedException.class, e::buffer);
            assertThrows(ClosedException.class, () -> qs.push(done, e));
            e.close(); // a no-op once pushed
            assertEquals(1, qs.len(work));

            Element got = other.pull(work); // another handle: the same bytes, no copy
            assertEquals(0, got.index());
            assertEquals(work, got.fromQueue());
            assertArrayEquals(ascii("hello"), head(got, 5));
            got.buffer().put(0, (byte) 'j');
            got.close(); // back where it came from
            assertEquals(1, qs.len(work));
            try (Element again = qs.pull(work)) {
                assertArrayEquals(ascii("jello"), head(again, 5));
            }
            assertEquals(1, qs.len(work));
            assertEquals(7, qs.len(free));
        }
    }

    @Test
    void setsTellTheirGeometryNamesFiguresAndHolders() {
        try (ShoalQueueSet qs = make()) {
            int free = qs.queue("free"), work = qs.queue("work"), done = qs.queue("done");
            assertEquals(64, qs.elementSize());
            assertEquals(8, qs.elements());
            assertEquals(List.of("free", "work", "done"), qs.queueNames());
            assertTrue(qs.holders().isEmpty());
            Element a = qs.pull(free), b = qs.pull(free);
            assertEquals(List.of(new QueueHolder((int) ProcessHandle.current().pid(), 2)), qs.holders());
            qs.push(done, a);
            assertNull(qs.pull(work, Duration.ofMillis(20)));
            QueueStats st = qs.stats(done);
            assertEquals(new QueueStats("done", 1, 2, 1, 0, 0), st);
            assertTrue(qs.stats(work).waits() >= 1, "the 20 ms pull slept");
            assertEquals(2, qs.stats(free).pulls());
            assertThrows(InvalidArgumentException.class, () -> qs.stats(3));

            // pullAny: the first non-empty queue in the order given, and which one it was.
            Element any = qs.pullAny(Duration.ZERO, work, done, free);
            assertEquals(done, any.fromQueue());
            assertEquals(a.index(), any.index());
            qs.push(work, any);
            any = qs.pullAny(Duration.ZERO, done, work);
            assertEquals(work, any.fromQueue());
            any.close();
            assertNull(qs.pullAny(Duration.ofMillis(20), done));
            assertThrows(InvalidArgumentException.class, () -> qs.pullAny(Duration.ZERO));
            assertThrows(InvalidArgumentException.class, () -> qs.pullAny(Duration.ZERO, work, 9));
            assertThrows(IllegalArgumentException.class, () -> qs.pullAny(Duration.ofMillis(-1), work));
            b.close();
        }
    }

    @Test
    void queuesAreFirstInFirstOutByPushOrder() {
        try (ShoalQueueSet qs = make()) {
            int free = qs.queue("free"), work = qs.queue("work");
            List<Element> es = new ArrayList<>();
            for (int i = 0; i < 6; i++) {
                es.add(qs.pull(free));
            }
            // Pushed in an order unrelated to the indexes: pulls follow the push order.
            int[] order = {3, 0, 5, 1, 4, 2};
            for (int i : order) {
                Element e = es.get(i);
                e.buffer().order(ByteOrder.LITTLE_ENDIAN).putInt(0, 100 + i);
                qs.push(work, e);
            }
            List<Element> first = qs.pullMany(work, 2);
            assertEquals(2, first.size());
            Element third = qs.pull(work);
            List<Element> rest = qs.pullMany(work, 100);
            assertEquals(3, rest.size());
            List<Element> all = new ArrayList<>(first);
            all.add(third);
            all.addAll(rest);
            for (int k = 0; k < order.length; k++) {
                Element e = all.get(k);
                assertEquals(es.get(order[k]).index(), e.index());
                assertEquals(100 + order[k], e.buffer().order(ByteOrder.LITTLE_ENDIAN).getInt(0));
            }
            assertTrue(qs.pullMany(work, 5).isEmpty());
            assertTrue(qs.pullMany(work, 0).isEmpty());
            qs.pushMany(free, all);
            assertEquals(8, qs.len(free));
        }
    }

    @Test
    void depthLimitsRefuseAPushAndLeaveTheElementsHeld() {
        try (ShoalQueueSet qs = make()) {
            int free = qs.queue("free"), work = qs.queue("work"), done = qs.queue("done");
            List<Element> three = qs.pullMany(free, 3);
            assertEquals(3, three.size());
            QueueFullException full = assertThrows(QueueFullException.class, () -> qs.pushMany(done, three));
            assertEquals(22, full.status());
            assertEquals(0, qs.len(done));
            for (Element e : three) {
                assertTrue(e.isHeld(), "still held after a refused push");
                e.buffer().put(0, (byte) 7); // and usable
            }
            qs.push(done, three.get(0));
            qs.push(done, three.get(1));
            assertThrows(QueueFullException.class, () -> qs.push(done, three.get(2)));
            assertTrue(three.get(2).isHeld());
            qs.push(work, three.get(2));
            // A move stops at the limit.
            assertEquals(0, qs.move(work, done, 10));
            Element fromDone = qs.pull(done);
            assertEquals(1, qs.move(work, done, 10));
            assertEquals(2, qs.len(done));
            // Giving an element back goes past the limit: it must always have somewhere to go.
            fromDone.close();
            assertEquals(3, qs.len(done));
            assertEquals(0, qs.len(work));
            assertEquals(5, qs.len(free));
        }
    }

    @Test
    void pullsWaitUpToTheirTimeout() throws Exception {
        try (ShoalQueueSet qs = make()) {
            int free = qs.queue("free"), work = qs.queue("work");
            assertNull(qs.pull(work));
            assertNull(qs.pull(work, Duration.ZERO));
            assertNull(qs.pull(work, Duration.ofMillis(30)));
            assertNull(qs.pull(work, Duration.ofNanos(1)));
            assertThrows(IllegalArgumentException.class, () -> qs.pull(work, Duration.ofMillis(-1)));
            // A pull that waits is woken by a push from another thread (bounded: 60 s).
            CountDownLatch waiting = new CountDownLatch(1);
            Thread pusher = new Thread(() -> {
                try {
                    waiting.await();
                    Thread.sleep(50);
                    Element e = qs.pull(free);
                    e.buffer().put(ascii("late"));
                    qs.push(work, e);
                } catch (InterruptedException ex) {
                    Thread.currentThread().interrupt();
                }
            });
            pusher.start();
            waiting.countDown();
            Element got = qs.pull(work, Duration.ofSeconds(60));
            assertNotNull(got, "no element came in 60 s");
            assertArrayEquals(ascii("late"), head(got, 4));
            got.close();
            pusher.join(60_000);
            // A huge timeout is accepted (and returns at once when an element is there).
            assertNotNull(qs.pull(work, Duration.ofSeconds(Long.MAX_VALUE)));
        }
    }

    @Test
    void anElementIsPushedOrGivenBackExactlyOnceWhateverTheThreads() throws Exception {
        try (ShoalQueueSet qs = make()) {
            int free = qs.queue("free"), work = qs.queue("work");
            ExecutorService pool = Executors.newFixedThreadPool(4);
            try {
                for (int round = 0; round < 200; round++) {
                    Element e = qs.pull(free);
                    CountDownLatch go = new CountDownLatch(1);
                    AtomicInteger pushed = new AtomicInteger();
                    List<Future<?>> fs = new ArrayList<>();
                    for (int t = 0; t < 4; t++) {
                        int kind = t;
                        fs.add(pool.submit(() -> {
                            go.await();
                            try {
                                if (kind % 2 == 0) {
                                    qs.push(work, e);
                                    pushed.incrementAndGet();
                                } else {
                                    e.close();
                                }
                            } catch (ClosedException lost) {
                                // Another thread took it first.
                            }
                            return null;
                        }));
                    }
                    go.countDown();
                    for (Future<?> f : fs) {
                        f.get(60, TimeUnit.SECONDS);
                    }
                    assertFalse(e.isHeld());
                    assertTrue(pushed.get() <= 1, "pushed " + pushed.get() + " times");
                    assertEquals(8, qs.len(free) + qs.len(work), "round " + round + ": an element lost or doubled");
                    assertEquals(pushed.get(), qs.len(work));
                    qs.move(work, free, 8);
                }
            } finally {
                pool.shutdownNow();
            }
        }
    }

    @Test
    void threadsPassElementsBackAndForth() throws Exception {
        try (ShoalQueueSet qs = store.queueSet("pp", QueueOptions.of(16, 4).queue("a2b").queue("b2a"))) {
            int free = qs.queue("free"), a2b = qs.queue("a2b"), b2a = qs.queue("b2a");
            int rounds = 5000;
            Thread b = new Thread(() -> {
                for (int i = 0; i < rounds; i++) {
                    Element e = qs.pull(a2b, Duration.ofSeconds(60));
                    if (e == null) {
                        return;
                    }
                    ByteBuffer bb = e.buffer().order(ByteOrder.LITTLE_ENDIAN);
                    bb.putLong(0, bb.getLong(0) + 1);
                    qs.push(b2a, e);
                }
            });
            b.start();
            Element e = qs.pull(free);
            for (int i = 0; i < rounds; i++) {
                e.buffer().order(ByteOrder.LITTLE_ENDIAN).putLong(0, 2L * i);
                qs.push(a2b, e);
                e = qs.pull(b2a, Duration.ofSeconds(60));
                assertNotNull(e, "round " + i + ": no answer in 60 s");
                assertEquals(2L * i + 1, e.buffer().order(ByteOrder.LITTLE_ENDIAN).getLong(0));
            }
            qs.push(free, e);
            b.join(60_000);
            assertEquals(4, qs.len(free));
        }
    }

    @Test
    void closingTheSetGivesBackWhatItHolds() {
        ShoalQueueSet qs = make();
        int free = qs.queue("free");
        List<Element> held = qs.pullMany(free, 3);
        Element one = qs.pull(free);
        assertEquals(4, qs.len(free));
        qs.close();
        assertTrue(qs.isClosed());
        for (Element e : held) {
            assertFalse(e.isHeld());
        }
        assertFalse(one.isHeld());
        one.close();
        assertThrows(ClosedException.class, () -> qs.pull(free));
        assertThrows(ClosedException.class, () -> qs.len(free));
        assertThrows(ClosedException.class, () -> qs.queue("free"));
        qs.close(); // idempotent
        try (ShoalQueueSet again = store.queueSet("jobs")) {
            assertEquals(8, again.len(free));
        }
    }

    @Test
    void anElementOutlivesItsStoreHandleAndStillGoesBack() {
        ShoalQueueSet qs = make();
        int free = qs.queue("free");
        Element e = qs.pull(free);
        e.buffer().put(ascii("kept"));
        store.close();
        assertThrows(ClosedException.class, () -> qs.pull(free));
        assertThrows(ClosedException.class, () -> qs.push(free, e));
        assertArrayEquals(ascii("kept"), head(e, 4), "the bytes stay mapped while the element is reachable");
        e.close(); // still goes back through the set's handle
        assertFalse(e.isHeld());
        store = Shoal.open(name);
        try (ShoalQueueSet again = store.queueSet("jobs")) {
            assertEquals(8, again.len(free));
        }
    }

    @Test
    void anUnreachableElementGoesBack() throws Exception {
        try (ShoalQueueSet qs = make()) {
            int free = qs.queue("free");
            dropOne(qs, free);
            assertEquals(7, qs.len(free));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (qs.len(free) != 8) {
                assertTrue(System.nanoTime() < deadline, "the dropped element did not come back in 60 s");
                System.gc();
                Thread.sleep(10);
            }
        }
    }

    private static void dropOne(ShoalQueueSet qs, int free) {
        Element e = qs.pull(free);
        e.buffer().put(0, (byte) 1);
    }

    @Test
    void aBufferKeptPastThePushNeverReachesTheNextHoldersBytesOnFfm() {
        try (ShoalQueueSet qs = make()) {
            int free = qs.queue("free"), work = qs.queue("work");
            Element e = qs.pull(free);
            ByteBuffer kept = e.buffer();
            ByteBuffer view = kept.slice(8, 8);
            kept.put(0, (byte) 1);
            qs.push(work, e);
            if (Shoal.backend().equals("ffm")) {
                assertThrows(IllegalStateException.class, () -> kept.get(0));
                assertThrows(IllegalStateException.class, () -> view.put(0, (byte) 2));
            } else {
                // JNI cannot revoke a direct buffer: the memory stays mapped (no crash), and
                // the element's own calls refuse.
                assertEquals(1, kept.get(0));
            }
            assertThrows(ClosedException.class, e::buffer);
            // A refused push revokes the buffers taken before it on FFM: a new one works.
            Element a = qs.pull(free);
            Element b = qs.pull(free);
            Element c = qs.pull(free);
            int done = qs.queue("done");
            qs.push(done, a);
            qs.push(done, b);
            ByteBuffer before = c.buffer();
            assertThrows(QueueFullException.class, () -> qs.push(done, c));
            if (Shoal.backend().equals("ffm")) {
                assertThrows(IllegalStateException.class, () -> before.get(0));
            }
            c.buffer().put(0, (byte) 9);
            c.close();
        }
    }

    @Test
    void failuresRaiseTheirExceptions() {
        try (ShoalQueueSet qs = make()) {
            int free = qs.queue("free");
            assertThrows(InvalidArgumentException.class, () -> qs.pull(99));
            assertThrows(InvalidArgumentException.class, () -> qs.len(99));
            assertThrows(InvalidArgumentException.class, () -> qs.move(free, free, 1));
            assertThrows(NotFoundException.class, () -> qs.queue("nope"));
            assertThrows(InvalidArgumentException.class, () -> qs.queue(""));
            assertThrows(NullPointerException.class, () -> qs.queue(null));
            assertThrows(IllegalArgumentException.class, () -> qs.pullMany(free, -1));
            assertThrows(NotFoundException.class, () -> store.queueSet("none"));
            assertThrows(InvalidArgumentException.class, () -> store.map("jobs", Codecs.BYTES, Codecs.BYTES));
            store.map("amap", Codecs.BYTES, Codecs.BYTES);
            assertThrows(InvalidArgumentException.class, () -> store.queueSet("amap", QueueOptions.of(8, 1)));
            assertEquals(0, qs.reclaim());

            Element e = qs.pull(free);
            InvalidArgumentException twice = assertThrows(InvalidArgumentException.class,
                    () -> qs.pushMany(free, List.of(e, e)));
            assertTrue(twice.getMessage().contains("twice"), twice.getMessage());
            assertTrue(e.isHeld());
            try (ShoalQueueSet other = store.queueSet("jobs")) {
                assertThrows(InvalidArgumentException.class, () -> other.push(free, e));
            }
            assertTrue(e.isHeld());
            assertThrows(NullPointerException.class, () -> qs.push(free, null));
            e.close();
            assertEquals(8, qs.len(free));
        }
        assertThrows(IllegalArgumentException.class, () -> QueueOptions.of(0, 1));
        assertThrows(IllegalArgumentException.class, () -> QueueOptions.of(1, 0));
        assertThrows(IllegalArgumentException.class, () -> QueueOptions.of(1, 1L << 32));
        assertThrows(IllegalArgumentException.class, () -> QueueOptions.of(1, 1).queue("q", -1));
        // The library's own limits: a queue name of 121 bytes.
        assertThrows(InvalidArgumentException.class,
                () -> store.queueSet("long", QueueOptions.of(8, 1).queue("q".repeat(121))));
    }

    @Test
    void anInitialQueueAndANewSetOfTheSameNameKeepTheFirstGeometry() {
        try (ShoalQueueSet qs = store.queueSet("init", QueueOptions.of(32, 3).initial("ready").queue("out"))) {
            int ready = qs.queue("ready"), out = qs.queue("out");
            assertEquals(0, ready);
            assertEquals(1, out);
            assertThrows(NotFoundException.class, () -> qs.queue("free"));
            assertEquals(3, qs.len(ready));
            try (ShoalQueueSet same = store.queueSet("init", QueueOptions.of(8, 100))) {
                Element e = same.pull(ready);
                assertEquals(32, e.size(), "the existing set keeps its own geometry");
                e.close();
            }
        }
    }
}
