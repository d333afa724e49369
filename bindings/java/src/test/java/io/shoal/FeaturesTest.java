package io.shoal;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Codecs, fixed maps, cells, UIDs, store calls and the exception of each failure. */
class FeaturesTest {
    private String name;
    private ShoalStore store;

    @BeforeEach
    void open() {
        name = TestStores.name("features");
        store = Shoal.open(name);
    }

    @AfterEach
    void close() {
        store.close();
        TestStores.remove(name);
    }

    @Test
    void backendMatchesTheJdk() {
        int feature = Runtime.version().feature();
        String expected = feature >= 22 && !"jni".equals(System.getProperty("shoal.backend")) ? "ffm" : "jni";
        assertEquals(expected, Shoal.backend());
        assertFalse(Shoal.version().isEmpty());
    }

    @Test
    void codecBytesFollowTheSharedConventions() {
        assertArrayEquals(new byte[] {1, 0, 0, 0, 0, 0, 0, 0}, Codecs.LONG.encode(1L));
        assertArrayEquals(new byte[] {-1, -1, -1, -1, -1, -1, -1, -1}, Codecs.LONG.encode(-1L));
        assertArrayEquals(Codecs.LONG.encode(-7L), Codecs.INTEGER.encode(-7));
        assertArrayEquals("é€".getBytes(StandardCharsets.UTF_8), Codecs.STRING.encode("é€"));
        assertArrayEquals(new byte[] {0, 0, 0, 0, 0, 0, -8, 63}, Codecs.DOUBLE.encode(1.5));
        assertEquals(Long.MIN_VALUE, Codecs.LONG.decode(Codecs.LONG.encode(Long.MIN_VALUE)));
        assertThrows(CodecException.class, () -> Codecs.LONG.decode(new byte[3]));
        assertThrows(CodecException.class, () -> Codecs.INTEGER.decode(Codecs.LONG.encode(1L << 40)));
        assertThrows(CodecException.class, () -> Codecs.STRING.decode(new byte[] {(byte) 0xff}));
        assertThrows(CodecException.class, () -> Codecs.STRING.encode("\ud800"));
        ByteBuffer bb = ByteBuffer.wrap(new byte[] {9, 1, 2, 3});
        bb.get();
        assertArrayEquals(new byte[] {1, 2, 3}, Codecs.BYTE_BUFFER.encode(bb));
        assertEquals(1, bb.position(), "encoding leaves the buffer's position alone");
    }

    @Test
    void byteArrayAndByteBufferMapsCompareByContent() {
        ShoalMap<byte[], byte[]> m = store.map("bytes", Codecs.BYTES, Codecs.BYTES);
        m.put(new byte[] {1, 2}, new byte[] {3});
        assertArrayEquals(new byte[] {3}, m.get(new byte[] {1, 2}));
        m.put(new byte[0], new byte[0]);
        assertArrayEquals(new byte[0], m.get(new byte[0]), "empty keys and values are allowed");
        ShoalMap<ByteBuffer, ByteBuffer> b = store.map("bb", Codecs.BYTE_BUFFER, Codecs.BYTE_BUFFER);
        b.put(ByteBuffer.wrap(new byte[] {1}), ByteBuffer.wrap(new byte[] {2}));
        assertEquals(ByteBuffer.wrap(new byte[] {2}), b.get(ByteBuffer.wrap(new byte[] {1})));
        assertEquals(Map.of(ByteBuffer.wrap(new byte[] {1}), ByteBuffer.wrap(new byte[] {2})), b);
    }

    @Test
    void largeValuesRoundTrip() {
        ShoalMap<String, byte[]> m = store.map("large", Codecs.STRING, Codecs.BYTES);
        byte[] big = new byte[3 << 20];
        new java.util.Random(1).nextBytes(big);
        m.put("big", big);
        assertArrayEquals(big, m.get("big"));
        String longKey = "k".repeat(60_000);
        m.put(longKey, new byte[] {1});
        assertTrue(m.keySet().contains(longKey));
        boolean found = false;
        for (Map.Entry<String, byte[]> e : m.entrySet()) {
            found |= e.getKey().equals("big") && java.util.Arrays.equals(big, e.getValue());
        }
        assertTrue(found, "iteration returns a value larger than its first buffer");
    }

    @Test
    void fixedMapsAddInPlace() {
        ShoalMap<byte[], Long> hits = store.fixedMap("hits", Codecs.bytes(8), Codecs.LONG);
        assertTrue(hits.isFixed());
        byte[] page = "page0042".getBytes(StandardCharsets.US_ASCII);
        assertEquals(1, hits.addAndGet(page, 1));
        assertEquals(11, hits.addAndGet(page, 10));
        assertEquals(11L, hits.get(page));
        assertThrows(InvalidArgumentException.class, () -> hits.put(new byte[3], 1L));
        assertEquals("fixed", store.mapKind("hits"));
        assertThrows(InvalidArgumentException.class, () -> store.map("hits", Codecs.BYTES, Codecs.BYTES),
                "a fixed map opened as a variable one");
        assertThrows(InvalidArgumentException.class, () -> store.fixedMap("hits", Codecs.bytes(4), Codecs.LONG),
                "a fixed map opened with other sizes");
        assertThrows(InvalidArgumentException.class, () -> store.fixedMap("v", Codecs.STRING, Codecs.LONG),
                "a codec without a fixed size");
    }

    @Test
    void cellsUpdateAtomically() throws Exception {
        ShoalCell<Long> c = store.cell("counter", Codecs.LONG, 10L);
        assertEquals(10L, c.get());
        assertEquals(11L, c.updateAndGet(x -> x + 1));
        assertEquals(11L, c.getAndUpdate(x -> x * 2));
        assertEquals(22L, c.get());
        assertTrue(c.compareAndSet(22L, 5L));
        assertFalse(c.compareAndSet(22L, 6L));
        assertEquals(8L, c.addAndGet(3));
        c.set(100L);
        assertEquals(100L, c.getAndSet(1L));
        // A second handle on the same cell sees the value; its initial value is ignored.
        ShoalCell<Long> again = store.cell("counter", Codecs.LONG, 999L);
        assertEquals(1L, again.get());
        Thread[] ts = new Thread[4];
        for (int i = 0; i < ts.length; i++) {
            ts[i] = new Thread(() -> {
                for (int j = 0; j < 1000; j++) {
                    again.updateAndGet(x -> x + 1);
                }
            });
            ts[i].start();
        }
        for (Thread t : ts) {
            t.join(60_000);
        }
        assertEquals(4001L, c.get());
        ShoalCell<String> s = store.cell("motd", Codecs.STRING, "hello");
        assertEquals("hello world", s.accumulateAndGet(" world", String::concat));
        assertThrows(IllegalStateException.class, () -> s.updateAndGet(x -> {
            throw new IllegalStateException("boom");
        }));
        assertEquals("hello world", s.get());
    }

    @Test
    void uidsNameKeysStably() {
        ShoalMap<String, String> m = store.map("uids", Codecs.STRING, Codecs.STRING, MapOptions.defaults().uids(true));
        assertTrue(m.hasUids());
        long uid = m.putWithUid("a", "1");
        assertEquals(uid, m.uid("a").getAsLong());
        m.put("a", "2");
        assertEquals("2", m.getByUid(uid));
        assertEquals("a", m.keyByUid(uid));
        assertTrue(m.uid("zz").isEmpty());
        m.remove("a");
        assertThrows(StaleUidException.class, () -> m.getByUid(uid));
        ShoalMap<String, String> plain = store.map("plain", Codecs.STRING, Codecs.STRING);
        assertFalse(plain.hasUids());
        assertThrows(InvalidArgumentException.class, () -> plain.uid("a"));
        assertThrows(InvalidArgumentException.class,
                () -> store.map("plain", Codecs.STRING, Codecs.STRING, MapOptions.defaults().uids(true)));
        // Reopened without asking for UIDs, the map still has them.
        assertTrue(store.map("uids", Codecs.STRING, Codecs.STRING).hasUids());
    }

    @Test
    void storeCalls() {
        store.map("one", Codecs.BYTES, Codecs.BYTES);
        store.fixedMap("two", Codecs.LONG, Codecs.LONG);
        assertTrue(store.maps().containsAll(List.of("one", "two")));
        assertEquals("variable", store.mapKind("one"));
        assertNull(store.mapKind("nope"));
        assertTrue(store.dropMap("one"));
        assertFalse(store.dropMap("one"));
        assertThrows(NotFoundException.class,
                () -> store.map("one", Codecs.BYTES, Codecs.BYTES, MapOptions.defaults().create(false)));
        assertEquals("/dev/shm/" + name + ".shoal", store.path());
        store.flush();
    }

    @Test
    void errorsBecomeTheirExceptions(@TempDir Path dir) throws Exception {
        assertThrows(NotFoundException.class,
                () -> Shoal.open(dir.resolve("missing.shoal"), Options.defaults().openMode(OpenMode.OPEN_EXISTING)));
        Path p = dir.resolve("s.shoal");
        Shoal.open(p).close();
        AlreadyExistsException e = assertThrows(AlreadyExistsException.class,
                () -> Shoal.open(p, Options.defaults().openMode(OpenMode.CREATE_NEW)));
        assertEquals(2, e.status());
        Path junk = dir.resolve("junk.shoal");
        Files.write(junk, new byte[8192]);
        assertThrows(CorruptStoreException.class, () -> Shoal.open(junk));
        ShoalMap<String, String> m = store.map("errs", Codecs.STRING, Codecs.STRING);
        assertThrows(InvalidArgumentException.class, () -> m.put("k".repeat(70_000), "v"), "key too large");
        assertThrows(InvalidArgumentException.class, () -> store.map("n".repeat(300), Codecs.BYTES, Codecs.BYTES));
        assertThrows(InvalidArgumentException.class, () -> store.map("a\0b", Codecs.BYTES, Codecs.BYTES));
        // The map recorded utf8 values: a Long codec is refused when the map is opened.
        assertThrows(InvalidArgumentException.class, () -> store.map("errs", Codecs.STRING, Codecs.LONG));
        // A map whose values recorded no type opens with any codec; bytes it cannot decode
        // are then a CodecException.
        Codec<String> untyped = Codec.of(Codecs.STRING::encode, Codecs.STRING::decode);
        store.map("errs_untyped", Codecs.STRING, untyped).put("text", "not a number");
        ShoalMap<String, Long> wrong = store.map("errs_untyped", Codecs.STRING, Codecs.LONG);
        assertThrows(CodecException.class, () -> wrong.get("text"));
        assertThrows(InvalidArgumentException.class, () -> wrong.addAndGet("text", 1),
                "adding to a value that is not 8 bytes");
        try (ShoalStore ro = Shoal.open(p, Options.defaults().openMode(OpenMode.READ_ONLY))) {
            ShoalMap<String, String> rm = ro.map("r", Codecs.STRING, Codecs.STRING, MapOptions.defaults().create(false));
            fail("a map that does not exist opened: " + rm);
        } catch (NotFoundException | ReadOnlyException expected) {
            // Either: the map is missing, and creating it would need a write.
        }
    }

    @Test
    void aFullStoreRaisesStoreFull(@TempDir Path dir) {
        try (ShoalStore small = Shoal.open(dir.resolve("small.shoal"),
                Options.defaults().maxSize(8L << 20).chunkSize(64 << 10).maxThreads(16).maxProcesses(16))) {
            ShoalMap<Long, byte[]> m = small.map("fill", Codecs.LONG, Codecs.BYTES);
            byte[] v = new byte[4096];
            StoreFullException full = assertThrows(StoreFullException.class, () -> {
                for (long i = 0; i < 100_000; i++) {
                    m.set(i, v);
                }
            });
            assertEquals(3, full.status());
            // The store stays usable: reads work, and removing makes room.
            assertArrayEquals(v, m.get(0L));
        }
    }

    @Test
    void aClosedStoreRefusesCalls() {
        String n = TestStores.name("closed");
        ShoalStore s = Shoal.open(n);
        ShoalMap<String, String> m = s.map("m", Codecs.STRING, Codecs.STRING);
        ShoalCell<Long> c = s.cell("c", Codecs.LONG, 0L);
        m.put("a", "b");
        s.close();
        s.close();
        assertTrue(s.isClosed());
        assertThrows(ClosedException.class, () -> m.get("a"));
        assertThrows(ClosedException.class, c::get);
        assertThrows(ClosedException.class, () -> s.map("m", Codecs.STRING, Codecs.STRING));
        assertThrows(ClosedException.class, m::size);
        TestStores.remove(n);
        // The data outlived the handle: reopening... the file was removed, so it is new.
        try (ShoalStore again = Shoal.open(n)) {
            assertTrue(again.map("m", Codecs.STRING, Codecs.STRING).isEmpty());
        } finally {
            TestStores.remove(n);
        }
    }

    @Test
    void aViewWithItsOwnLockTimeoutSharesTheMap() {
        ShoalMap<String, String> m = store.map("timeouts", Codecs.STRING, Codecs.STRING);
        ShoalMap<String, String> quick = m.withLockTimeout(java.time.Duration.ofMillis(50));
        quick.put("a", "1");
        assertEquals("1", m.get("a"));
        ShoalMap<byte[], Long> f = store.fixedMap("ftimeouts", Codecs.bytes(4), Codecs.LONG);
        assertEquals(2, f.withLockTimeout(java.time.Duration.ofSeconds(1)).addAndGet(new byte[4], 2));
        assertEquals(2L, f.get(new byte[4]));
        assertThrows(IllegalArgumentException.class, () -> m.withLockTimeout(java.time.Duration.ZERO));
    }

    @Test
    void optionsAreChecked() {
        assertThrows(IllegalArgumentException.class, () -> Options.defaults().maxProcesses(0));
        assertThrows(IllegalArgumentException.class, () -> Options.defaults().fileMode(010000));
        assertThrows(InvalidArgumentException.class, () -> Shoal.open(TestStores.name("bad"),
                Options.defaults().chunkSize(1000)), "a chunk size that is not a power of two");
    }
}
