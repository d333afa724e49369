package io.shoal;

import static org.junit.jupiter.api.Assertions.*;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * ShoalMap against ConcurrentHashMap: the same random operations on both, every result
 * compared, the contents compared at intervals. The seed is printed on failure.
 */
class MapContractTest {
    private String name;
    private ShoalStore store;

    @BeforeEach
    void open() {
        name = TestStores.name("contract");
        store = Shoal.open(name);
    }

    @AfterEach
    void close() {
        store.close();
        TestStores.remove(name);
    }

    @Test
    void randomOperationsMatchConcurrentHashMap() {
        long seed = Long.getLong("shoal.test.seed", System.nanoTime());
        ShoalMap<String, Long> shoal = store.map("random", Codecs.STRING, Codecs.LONG);
        ConcurrentHashMap<String, Long> model = new ConcurrentHashMap<>();
        try {
            runRandom(new Random(seed), shoal, model, 20_000);
        } catch (Throwable t) {
            throw new AssertionError("failed with -Dshoal.test.seed=" + seed + ": " + t, t);
        }
    }

    @Test
    void randomOperationsOnFixedMapMatchConcurrentHashMap() {
        long seed = Long.getLong("shoal.test.seed", System.nanoTime());
        Codec<String> key8 = Codec.of(s -> {
            byte[] b = new byte[8];
            byte[] x = s.getBytes(java.nio.charset.StandardCharsets.UTF_8);
            System.arraycopy(x, 0, b, 0, Math.min(8, x.length));
            return b;
        }, b -> new String(b, java.nio.charset.StandardCharsets.UTF_8).replace("\0", ""));
        Codec<String> fixedKey = new Codec<String>() {
            @Override
            public byte[] encode(String v) {
                return key8.encode(v);
            }

            @Override
            public String decode(byte[] b) {
                return key8.decode(b);
            }

            @Override
            public int fixedSize() {
                return 8;
            }
        };
        ShoalMap<String, Long> shoal = store.fixedMap("fixed", fixedKey, Codecs.LONG);
        ConcurrentHashMap<String, Long> model = new ConcurrentHashMap<>();
        try {
            runRandom(new Random(seed), shoal, model, 20_000);
        } catch (Throwable t) {
            throw new AssertionError("failed with -Dshoal.test.seed=" + seed + ": " + t, t);
        }
    }

    private static void runRandom(Random r, ShoalMap<String, Long> s, ConcurrentMap<String, Long> m, int ops) {
        for (int i = 0; i < ops; i++) {
            String k = "k" + r.nextInt(200);
            long v = r.nextInt(50);
            int op = r.nextInt(20);
            String what = "op " + i + " (" + op + ") on " + k;
            switch (op) {
                case 0: assertEquals(m.put(k, v), s.put(k, v), what); break;
                case 1: assertEquals(m.get(k), s.get(k), what); break;
                case 2: assertEquals(m.remove(k), s.remove(k), what); break;
                case 3: assertEquals(m.putIfAbsent(k, v), s.putIfAbsent(k, v), what); break;
                case 4: assertEquals(m.replace(k, v), s.replace(k, v), what); break;
                case 5: assertEquals(m.replace(k, v, v + 1), s.replace(k, v, v + 1), what); break;
                case 6: assertEquals(m.remove(k, v), s.remove(k, v), what); break;
                case 7: assertEquals(m.containsKey(k), s.containsKey(k), what); break;
                case 8: assertEquals(m.getOrDefault(k, -1L), s.getOrDefault(k, -1L), what); break;
                case 9: assertEquals(m.merge(k, v, Long::sum), s.merge(k, v, Long::sum), what); break;
                case 10: {
                    // Returning null removes, as in ConcurrentHashMap.
                    java.util.function.BiFunction<String, Long, Long> f = (kk, old) ->
                            old == null ? Long.valueOf(v) : (old % 3 == 0 ? null : old + v);
                    assertEquals(m.compute(k, f), s.compute(k, f), what);
                    break;
                }
                case 11: assertEquals(m.computeIfAbsent(k, kk -> v), s.computeIfAbsent(k, kk -> v), what); break;
                case 12: {
                    java.util.function.BiFunction<String, Long, Long> f = (kk, old) -> old > 25 ? null : old * 2;
                    assertEquals(m.computeIfPresent(k, f), s.computeIfPresent(k, f), what);
                    break;
                }
                case 13: {
                    long delta = r.nextInt(7) - 3;
                    Long expected = m.merge(k, delta, Long::sum);
                    assertEquals(expected.longValue(), s.addAndGet(k, delta), what);
                    break;
                }
                case 14: {
                    List<String> keys = List.of(k, "k" + r.nextInt(200), "k" + r.nextInt(200));
                    Map<String, Long> want = new HashMap<>();
                    for (String kk : keys) {
                        if (m.containsKey(kk)) {
                            want.put(kk, m.get(kk));
                        }
                    }
                    assertEquals(want, s.getAll(keys), what);
                    break;
                }
                case 15: {
                    Map<String, Long> batch = new HashMap<>();
                    for (int j = 0; j < 4; j++) {
                        batch.put("k" + r.nextInt(200), (long) r.nextInt(50));
                    }
                    m.putAll(batch);
                    s.putAll(batch);
                    break;
                }
                case 16: {
                    // Iterator removal of every entry with an odd value.
                    if (r.nextInt(20) == 0) {
                        m.entrySet().removeIf(e -> e.getValue() % 2 != 0);
                        for (Iterator<Map.Entry<String, Long>> it = s.entrySet().iterator(); it.hasNext(); ) {
                            if (it.next().getValue() % 2 != 0) {
                                it.remove();
                            }
                        }
                        assertEquals(m, s, what);
                    }
                    break;
                }
                case 17: assertEquals(m.size(), s.size(), what); break;
                case 18: {
                    if (r.nextInt(200) == 0) {
                        m.clear();
                        s.clear();
                        assertTrue(s.isEmpty(), what);
                    }
                    break;
                }
                default: {
                    List<String> keys = List.of(k, "k" + r.nextInt(200));
                    long removed = keys.stream().distinct().filter(m::containsKey).count();
                    keys.forEach(m::remove);
                    assertEquals(removed, s.removeAll(keys), what);
                }
            }
            if (i % 1000 == 0) {
                assertEquals(m, s, "contents after op " + i);
                assertEquals(s, m, "contents after op " + i);
                assertEquals(m.hashCode(), s.hashCode(), "hashCode after op " + i);
            }
        }
        assertEquals(m, s);
        assertEquals(m.keySet(), new HashSet<>(s.keySet()));
        assertEquals(new ArrayList<>(m.values()).stream().sorted().toList(),
                new ArrayList<>(s.values()).stream().sorted().toList());
    }

    @Test
    void viewsReadAndWriteThrough() {
        ShoalMap<String, String> s = store.map("views", Codecs.STRING, Codecs.STRING);
        s.put("a", "1");
        s.put("b", "2");
        s.put("c", "3");
        assertTrue(s.keySet().contains("a"));
        assertTrue(s.entrySet().contains(Map.entry("b", "2")));
        assertFalse(s.entrySet().contains(Map.entry("b", "9")));
        assertTrue(s.keySet().remove("a"));
        assertFalse(s.containsKey("a"));
        assertTrue(s.entrySet().remove(Map.entry("b", "2")));
        assertFalse(s.entrySet().remove(Map.entry("c", "9")));
        for (Map.Entry<String, String> e : s.entrySet()) {
            assertEquals("3", e.setValue("33"));
        }
        assertEquals("33", s.get("c"));
        assertTrue(s.values().contains("33"));
        assertTrue(s.containsValue("33"));
        s.values().clear();
        assertTrue(s.isEmpty());
        Iterator<String> it = s.keySet().iterator();
        assertFalse(it.hasNext());
        assertThrows(java.util.NoSuchElementException.class, it::next);
        s.put("x", "y");
        Iterator<String> it2 = s.keySet().iterator();
        assertThrows(IllegalStateException.class, it2::remove);
    }

    @Test
    void iterationIsWeaklyConsistentUnderConcurrentWrites() throws Exception {
        ShoalMap<Long, Long> s = store.map("weak", Codecs.LONG, Codecs.LONG);
        for (long i = 0; i < 5000; i++) {
            s.set(i, i);
        }
        // Keys >= 5000 come and go during the walk; keys < 5000 stay the whole time.
        Thread writer = new Thread(() -> {
            for (long i = 5000; i < 20000; i++) {
                s.set(i, i);
                s.delete(i - 100);
            }
        });
        writer.start();
        Set<Long> seen = new HashSet<>();
        for (Long k : s.keySet()) {
            assertTrue(seen.add(k), "key returned twice: " + k);
        }
        writer.join();
        for (long i = 0; i < 4900; i++) {
            // Keys 0..4899 are never removed by the writer (it removes from 4900 up).
            assertTrue(seen.contains(i), "a key present throughout was not returned: " + i);
        }
    }

    @Test
    void nullsAreRefusedLikeConcurrentHashMap() {
        ShoalMap<String, String> s = store.map("nulls", Codecs.STRING, Codecs.STRING);
        assertThrows(NullPointerException.class, () -> s.put(null, "v"));
        assertThrows(NullPointerException.class, () -> s.put("k", null));
        assertThrows(NullPointerException.class, () -> s.get(null));
        assertThrows(NullPointerException.class, () -> s.containsValue(null));
        assertFalse(s.remove("k", null));
    }

    @Test
    void computeFunctionThatThrowsLeavesMapUsable() {
        ShoalMap<String, Long> s = store.map("throws", Codecs.STRING, Codecs.LONG);
        s.put("k", 1L);
        assertThrows(IllegalStateException.class, () -> s.compute("k", (k, v) -> {
            throw new IllegalStateException("boom");
        }));
        assertEquals(1L, s.get("k"));
        // Nothing stayed locked: a write and an update go through at once.
        s.put("k", 2L);
        assertEquals(3L, s.merge("k", 1L, Long::sum));
    }

    @Test
    void threadsMergingTheSameKeysGiveExactTotals() throws Exception {
        ShoalMap<String, Long> s = store.map("merge", Codecs.STRING, Codecs.LONG);
        int threads = 4;
        int per = 3000;
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int id = t;
            ts.add(new Thread(() -> {
                for (int i = 0; i < per; i++) {
                    String k = "k" + (i % 5);
                    switch ((i + id) % 3) {
                        case 0: s.merge(k, 1L, Long::sum); break;
                        case 1: s.compute(k, (kk, v) -> v == null ? 1L : v + 1); break;
                        default: s.addAndGet(k, 1);
                    }
                }
            }));
        }
        ts.forEach(Thread::start);
        for (Thread t : ts) {
            t.join(120_000);
            assertFalse(t.isAlive(), "a merging thread did not finish in 120 s");
        }
        long total = 0;
        for (int k = 0; k < 5; k++) {
            total += s.get("k" + k);
        }
        assertEquals((long) threads * per, total);
    }
}
