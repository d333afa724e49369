package io.shoal.internal;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The JNI backend (Java 17-21): each method calls the C shim (src/main/c/shoal_jni.c),
 * which calls the C API and throws {@link Status#exception} on failure. Strings cross as
 * NUL-terminated UTF-8 byte arrays, because JNI's own string encoding is not UTF-8.
 * Internal: not part of the API.
 */
final class JniNative implements NativeApi {
    private JniNative() {}

    static NativeApi load() {
        Path shoal = NativeLoader.locate(NativeLoader.LIBSHOAL);
        Path jni = NativeLoader.locate(NativeLoader.LIBJNI);
        // Loaded first by its full path: the shim's dependency on libshoal_ffi.so is then
        // met by the loaded library's soname, wherever the shim came from.
        System.load(shoal.toString());
        System.load(jni.toString());
        return new JniNative();
    }

    private static byte[] z(String s) {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        byte[] r = new byte[b.length + 1];
        System.arraycopy(b, 0, r, 0, b.length);
        return r;
    }

    private static String str(byte[] b) {
        return new String(b, StandardCharsets.UTF_8);
    }

    @Override
    public String backend() {
        return "jni";
    }

    private static native byte[][] storeMaps0(long store);

    @Override
    public List<String> storeMaps(long store) {
        List<String> r = new ArrayList<>();
        for (byte[] b : storeMaps0(store)) {
            r.add(str(b));
        }
        return r;
    }

    private static native byte[] version0();

    @Override
    public String version() {
        return str(version0());
    }

    private static native long storeOpen0(byte[] path, long[] opts);

    @Override
    public long storeOpen(String path, long[] opts) {
        return storeOpen0(z(path), opts);
    }

    private static native void storeClose0(long store);

    @Override
    public void storeClose(long store) {
        storeClose0(store);
    }

    private static native byte[] storePath0(long store);

    @Override
    public String storePath(long store) {
        return str(storePath0(store));
    }

    private static native void storeDropMap0(long store, byte[] name);

    @Override
    public void storeDropMap(long store, String name) {
        storeDropMap0(store, z(name));
    }

    private static native void storeFlush0(long store);

    @Override
    public void storeFlush(long store) {
        storeFlush0(store);
    }

    private static native void storeDestroy0(byte[] path);

    @Override
    public void storeDestroy(String path) {
        storeDestroy0(z(path));
    }

    private static native long[] mapKind0(long store, byte[] name);

    @Override
    public long[] mapKind(long store, String name) {
        return mapKind0(store, z(name));
    }

    private static native long mapOpen0(long store, byte[] name, boolean create, boolean uids, long[] types);

    @Override
    public long mapOpen(long store, String name, boolean create, boolean uids, long[] types) {
        return mapOpen0(store, z(name), create, uids, types);
    }

    private static native long[] mapTypes0(long map);

    @Override
    public long[] mapTypes(long map) {
        return mapTypes0(map);
    }

    private static native long mapWithTimeout0(long map, int timeoutMs);

    @Override
    public long mapWithTimeout(long map, int timeoutMs) {
        return mapWithTimeout0(map, timeoutMs);
    }

    private static native void mapClose0(long map);

    @Override
    public void mapClose(long map) {
        mapClose0(map);
    }

    private static native byte[] mapGet0(long map, byte[] key);

    @Override
    public byte[] mapGet(long map, byte[] key) {
        return mapGet0(map, key);
    }

    private static native boolean mapPut0(long map, byte[] key, byte[] value);

    @Override
    public boolean mapPut(long map, byte[] key, byte[] value) {
        return mapPut0(map, key, value);
    }

    private static native boolean mapPutIfAbsent0(long map, byte[] key, byte[] value);

    @Override
    public boolean mapPutIfAbsent(long map, byte[] key, byte[] value) {
        return mapPutIfAbsent0(map, key, value);
    }

    private static native boolean mapPutIfPresent0(long map, byte[] key, byte[] value);

    @Override
    public boolean mapPutIfPresent(long map, byte[] key, byte[] value) {
        return mapPutIfPresent0(map, key, value);
    }

    private static native boolean mapCas0(long map, byte[] key, byte[] expected, byte[] update);

    @Override
    public boolean mapCas(long map, byte[] key, byte[] expected, byte[] update) {
        return mapCas0(map, key, expected, update);
    }

    private static native boolean mapRemove0(long map, byte[] key);

    @Override
    public boolean mapRemove(long map, byte[] key) {
        return mapRemove0(map, key);
    }

    private static native boolean mapContains0(long map, byte[] key);

    @Override
    public boolean mapContains(long map, byte[] key) {
        return mapContains0(map, key);
    }

    private static native long mapAdd0(long map, byte[] key, long delta);

    @Override
    public long mapAdd(long map, byte[] key, long delta) {
        return mapAdd0(map, key, delta);
    }

    private static native long mapLen0(long map);

    @Override
    public long mapLen(long map) {
        return mapLen0(map);
    }

    private static native void mapClear0(long map);

    @Override
    public void mapClear(long map) {
        mapClear0(map);
    }

    private static native byte[][] mapGetMany0(long map, byte[][] keys);

    @Override
    public byte[][] mapGetMany(long map, byte[][] keys) {
        return mapGetMany0(map, keys);
    }

    private static native void mapPutMany0(long map, byte[][] keys, byte[][] values);

    @Override
    public void mapPutMany(long map, byte[][] keys, byte[][] values) {
        mapPutMany0(map, keys, values);
    }

    private static native long mapRemoveMany0(long map, byte[][] keys);

    @Override
    public long mapRemoveMany(long map, byte[][] keys) {
        return mapRemoveMany0(map, keys);
    }

    private static native long mapUid0(long map, byte[] key);

    @Override
    public long mapUid(long map, byte[] key) {
        return mapUid0(map, key);
    }

    private static native long mapPutUid0(long map, byte[] key, byte[] value);

    @Override
    public long mapPutUid(long map, byte[] key, byte[] value) {
        return mapPutUid0(map, key, value);
    }

    private static native byte[] mapGetByUid0(long map, long uid);

    @Override
    public byte[] mapGetByUid(long map, long uid) {
        return mapGetByUid0(map, uid);
    }

    private static native byte[] mapKeyByUid0(long map, long uid);

    @Override
    public byte[] mapKeyByUid(long map, long uid) {
        return mapKeyByUid0(map, uid);
    }

    private static native long iterOpen0(long map);

    @Override
    public long iterOpen(long map) {
        return iterOpen0(map);
    }

    private static native byte[][] iterNext0(long iter);

    @Override
    public byte[][] iterNext(long iter) {
        return iterNext0(iter);
    }

    private static native void iterClose0(long iter);

    @Override
    public void iterClose(long iter) {
        iterClose0(iter);
    }

    private static native long fixedOpen0(long store, byte[] name, int keySize, int valueSize, boolean create,
            long[] types);

    @Override
    public long fixedOpen(long store, String name, int keySize, int valueSize, boolean create, long[] types) {
        return fixedOpen0(store, z(name), keySize, valueSize, create, types);
    }

    private static native long[] fixedTypes0(long fixed);

    @Override
    public long[] fixedTypes(long fixed) {
        return fixedTypes0(fixed);
    }

    private static native long fixedWithTimeout0(long fixed, int timeoutMs);

    @Override
    public long fixedWithTimeout(long fixed, int timeoutMs) {
        return fixedWithTimeout0(fixed, timeoutMs);
    }

    private static native void fixedClose0(long fixed);

    @Override
    public void fixedClose(long fixed) {
        fixedClose0(fixed);
    }

    private static native byte[] fixedGet0(long fixed, byte[] key, int valueSize);

    @Override
    public byte[] fixedGet(long fixed, byte[] key, int valueSize) {
        return fixedGet0(fixed, key, valueSize);
    }

    private static native boolean fixedPut0(long fixed, byte[] key, byte[] value);

    @Override
    public boolean fixedPut(long fixed, byte[] key, byte[] value) {
        return fixedPut0(fixed, key, value);
    }

    private static native boolean fixedPutIfAbsent0(long fixed, byte[] key, byte[] value);

    @Override
    public boolean fixedPutIfAbsent(long fixed, byte[] key, byte[] value) {
        return fixedPutIfAbsent0(fixed, key, value);
    }

    private static native boolean fixedPutIfPresent0(long fixed, byte[] key, byte[] value);

    @Override
    public boolean fixedPutIfPresent(long fixed, byte[] key, byte[] value) {
        return fixedPutIfPresent0(fixed, key, value);
    }

    private static native boolean fixedCas0(long fixed, byte[] key, byte[] expected, byte[] update);

    @Override
    public boolean fixedCas(long fixed, byte[] key, byte[] expected, byte[] update) {
        return fixedCas0(fixed, key, expected, update);
    }

    private static native boolean fixedRemove0(long fixed, byte[] key);

    @Override
    public boolean fixedRemove(long fixed, byte[] key) {
        return fixedRemove0(fixed, key);
    }

    private static native boolean fixedContains0(long fixed, byte[] key);

    @Override
    public boolean fixedContains(long fixed, byte[] key) {
        return fixedContains0(fixed, key);
    }

    private static native long fixedAdd0(long fixed, byte[] key, long delta);

    @Override
    public long fixedAdd(long fixed, byte[] key, long delta) {
        return fixedAdd0(fixed, key, delta);
    }

    private static native long fixedLen0(long fixed);

    @Override
    public long fixedLen(long fixed) {
        return fixedLen0(fixed);
    }

    private static native void fixedClear0(long fixed);

    @Override
    public void fixedClear(long fixed) {
        fixedClear0(fixed);
    }

    private static native byte[][] fixedGetMany0(long fixed, byte[][] keys, int valueSize);

    @Override
    public byte[][] fixedGetMany(long fixed, byte[][] keys, int valueSize) {
        return fixedGetMany0(fixed, keys, valueSize);
    }

    private static native void fixedPutMany0(long fixed, byte[][] keys, byte[][] values);

    @Override
    public void fixedPutMany(long fixed, byte[][] keys, byte[][] values) {
        fixedPutMany0(fixed, keys, values);
    }

    private static native long fixedRemoveMany0(long fixed, byte[][] keys);

    @Override
    public long fixedRemoveMany(long fixed, byte[][] keys) {
        return fixedRemoveMany0(fixed, keys);
    }

    private static native long fixedIterOpen0(long fixed);

    @Override
    public long fixedIterOpen(long fixed) {
        return fixedIterOpen0(fixed);
    }

    private static native byte[][] fixedIterNext0(long iter, int keySize, int valueSize);

    @Override
    public byte[][] fixedIterNext(long iter, int keySize, int valueSize) {
        return fixedIterNext0(iter, keySize, valueSize);
    }

    private static native void fixedIterClose0(long iter);

    @Override
    public void fixedIterClose(long iter) {
        fixedIterClose0(iter);
    }

    // ---- queue sets --------------------------------------------------------------------

    private static native long queueOpen0(long store, byte[] name, boolean create, long elementSize, long elements,
            byte[][] queues, long[] limits, byte[] initial, boolean redeliver);

    @Override
    public long queueOpen(long store, String name, boolean create, long elementSize, long elements, String[] queues,
            long[] limits, String initial, boolean redeliver) {
        byte[][] qs = null;
        if (queues != null) {
            qs = new byte[queues.length][];
            for (int i = 0; i < queues.length; i++) {
                qs[i] = z(queues[i]);
            }
        }
        return queueOpen0(store, z(name), create, elementSize, elements, qs, limits,
                initial == null ? null : z(initial), redeliver);
    }

    private static native void queueClose0(long set);

    @Override
    public void queueClose(long set) {
        queueClose0(set);
    }

    private static native int queueIndex0(long set, byte[] name);

    @Override
    public int queueIndex(long set, String name) {
        return queueIndex0(set, z(name));
    }

    private static native boolean queuePull0(long set, int q, long timeoutMs, long[] out);

    @Override
    public boolean queuePull(long set, int q, long timeoutMs, long[] out) {
        return queuePull0(set, q, timeoutMs, out);
    }

    private static native int queuePullMany0(long set, int q, int max, long[] out);

    @Override
    public int queuePullMany(long set, int q, int max, long[] out) {
        return queuePullMany0(set, q, max, out);
    }

    private static native void queuePush0(long set, int q, long[] e);

    @Override
    public void queuePush(long set, int q, long[] e) {
        queuePush0(set, q, e);
    }

    private static native void queuePushMany0(long set, int q, long[] elems, int n);

    @Override
    public void queuePushMany(long set, int q, long[] elems, int n) {
        queuePushMany0(set, q, elems, n);
    }

    private static native void queueRelease0(long set, long[] e);

    @Override
    public void queueRelease(long set, long[] e) {
        queueRelease0(set, e);
    }

    private static native long queueMove0(long set, int from, int to, long max);

    @Override
    public long queueMove(long set, int from, int to, long max) {
        return queueMove0(set, from, to, max);
    }

    private static native long queueLen0(long set, int q);

    @Override
    public long queueLen(long set, int q) {
        return queueLen0(set, q);
    }

    private static native long queueReclaim0(long set);

    @Override
    public long queueReclaim(long set) {
        return queueReclaim0(set);
    }

    private static native boolean queuePullAny0(long set, int[] queues, long timeoutMs, long[] out);

    @Override
    public boolean queuePullAny(long set, int[] queues, long timeoutMs, long[] out) {
        return queuePullAny0(set, queues, timeoutMs, out);
    }

    private static native long[] queueInfo0(long set);

    @Override
    public long[] queueInfo(long set) {
        return queueInfo0(set);
    }

    private static native byte[] queueName0(long set, int q);

    @Override
    public String queueName(long set, int q) {
        return str(queueName0(set, q));
    }

    private static native long[] queueStats0(long set, int q);

    @Override
    public long[] queueStats(long set, int q) {
        return queueStats0(set, q);
    }

    private static native long[] queueHolders0(long set);

    @Override
    public long[] queueHolders(long set) {
        return queueHolders0(set);
    }

    private static native ByteBuffer directBuffer0(long address, long length);

    @Override
    public Region region(long address, int length) {
        ByteBuffer b = directBuffer0(address, length);
        return new Region() {
            @Override
            public ByteBuffer buffer() {
                return b;
            }

            @Override
            public boolean revocable() {
                return false;
            }

            @Override
            public void revoke() {
                // A direct buffer made by JNI cannot be revoked; see Element.buffer().
            }
        };
    }
}
