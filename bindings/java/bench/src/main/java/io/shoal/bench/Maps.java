package io.shoal.bench;

import io.shoal.Codecs;
import io.shoal.ShoalMap;
import io.shoal.ShoalStore;
import io.shoal.Shoal;
import java.io.File;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import net.openhft.chronicle.map.ChronicleMap;

/**
 * The maps under test behind one interface, with 16-byte keys and 16-byte values. The
 * shared-memory maps live in files in /dev/shm that are filled once and reused by every
 * benchmark JVM (so that a fork measures, not fills); ConcurrentHashMap is filled in each
 * JVM.
 */
final class Maps {
    private Maps() {}

    /** Key i: its 8 little-endian bytes, then 8 bytes of a multiplicative hash of i. */
    static void key(long i, byte[] out) {
        long h = i * 0x9E3779B97F4A7C15L;
        for (int b = 0; b < 8; b++) {
            out[b] = (byte) (i >>> (8 * b));
            out[8 + b] = (byte) (h >>> (8 * b));
        }
    }

    static byte[] value(long i) {
        byte[] v = new byte[16];
        key(~i, v);
        return v;
    }

    interface KV extends AutoCloseable {
        byte[] get(byte[] key);

        void put(byte[] key, byte[] value);

        @Override
        void close();
    }

    static KV open(String impl, int keys) throws IOException {
        switch (impl) {
            case "shoal": return shoal(keys, false);
            case "shoal-fixed": return shoal(keys, true);
            case "chronicle": return chronicle(keys);
            case "chm": return chm(keys);
            default: throw new IllegalArgumentException(impl);
        }
    }

    static String shoalName(int keys) {
        return "shoal-bench-" + keys;
    }

    static KV shoal(int keys, boolean fixed) {
        ShoalStore store = Shoal.open(shoalName(keys));
        ShoalMap<byte[], byte[]> m = fixed
                ? store.fixedMap("fixed", Codecs.bytes(16), Codecs.bytes(16))
                : store.map("var", Codecs.BYTES, Codecs.BYTES);
        if (m.mappingCount() != keys) {
            m.clear();
            fill(keys, m::putAll);
        }
        return new KV() {
            @Override
            public byte[] get(byte[] key) {
                return m.get(key);
            }

            @Override
            public void put(byte[] key, byte[] value) {
                m.set(key, value);
            }

            @Override
            public void close() {
                store.close();
            }
        };
    }

    static File chronicleFile(int keys) {
        return new File("/dev/shm/chronicle-bench-" + keys + ".dat");
    }

    static ChronicleMap<byte[], byte[]> chronicleOpen(int keys) throws IOException {
        return ChronicleMap.of(byte[].class, byte[].class)
                .name("bench")
                .constantKeySizeBySample(new byte[16])
                .constantValueSizeBySample(new byte[16])
                .entries(keys)
                .putReturnsNull(true)
                .createPersistedTo(chronicleFile(keys));
    }

    static KV chronicle(int keys) throws IOException {
        ChronicleMap<byte[], byte[]> m = chronicleOpen(keys);
        if (m.size() != keys) {
            m.clear();
            fill(keys, m::putAll);
        }
        return new KV() {
            @Override
            public byte[] get(byte[] key) {
                return m.get(key);
            }

            @Override
            public void put(byte[] key, byte[] value) {
                m.put(key, value);
            }

            @Override
            public void close() {
                m.close();
            }
        };
    }

    /** A 16-byte key as ConcurrentHashMap needs it: content equality. */
    record Key(long a, long b) {
        static Key of(byte[] k) {
            long a = 0;
            long b = 0;
            for (int i = 7; i >= 0; i--) {
                a = (a << 8) | (k[i] & 0xff);
                b = (b << 8) | (k[8 + i] & 0xff);
            }
            return new Key(a, b);
        }
    }

    static KV chm(int keys) {
        ConcurrentHashMap<Key, byte[]> m = new ConcurrentHashMap<>(keys * 2);
        byte[] k = new byte[16];
        for (long i = 0; i < keys; i++) {
            key(i, k);
            m.put(Key.of(k), value(i));
        }
        return new KV() {
            @Override
            public byte[] get(byte[] key) {
                return m.get(Key.of(key));
            }

            @Override
            public void put(byte[] key, byte[] value) {
                m.put(Key.of(key), value);
            }

            @Override
            public void close() {
                m.clear();
            }
        };
    }

    private static void fill(int keys, java.util.function.Consumer<Map<byte[], byte[]>> putAll) {
        Map<byte[], byte[]> batch = new LinkedHashMap<>();
        for (long i = 0; i < keys; i++) {
            byte[] k = new byte[16];
            key(i, k);
            batch.put(k, value(i));
            if (batch.size() == 10_000) {
                putAll.accept(batch);
                batch.clear();
            }
        }
        putAll.accept(batch);
    }
}
