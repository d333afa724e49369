package io.shoal;

import io.shoal.internal.NativeApi;
import java.lang.ref.Cleaner;
import java.lang.ref.Reference;

/**
 * One native map handle (variable-size or fixed-size) and the calls on it, on bytes.
 * The handle is freed when the Table becomes unreachable (a Cleaner), never while a call
 * may be using it: each call ends with a reachability fence, so the JIT cannot consider
 * the Table dead in the middle of a native call. That makes a use-after-free impossible
 * without a lock or counter on the hot path.
 */
abstract class Table {
    static final Cleaner CLEANER = Cleaner.create();

    final NativeApi api;
    final long h;
    final ShoalStore store;
    final String name;

    Table(NativeApi api, long h, ShoalStore store, String name, Runnable free) {
        this.api = api;
        this.h = h;
        this.store = store;
        this.name = name;
        CLEANER.register(this, free);
    }

    final void live() {
        if (store.closed) {
            throw new ClosedException(0, "the store " + store.path() + " is closed");
        }
    }

    abstract byte[] get(byte[] k);

    abstract boolean put(byte[] k, byte[] v);

    abstract boolean putIfAbsent(byte[] k, byte[] v);

    abstract boolean putIfPresent(byte[] k, byte[] v);

    abstract boolean cas(byte[] k, byte[] expected, byte[] update);

    abstract boolean remove(byte[] k);

    abstract boolean contains(byte[] k);

    abstract long add(byte[] k, long delta);

    abstract long len();

    abstract void clear();

    abstract byte[][] getMany(byte[][] keys);

    abstract void putMany(byte[][] keys, byte[][] values);

    abstract long removeMany(byte[][] keys);

    abstract Cursor cursor();

    /** A second handle on the same map whose calls wait at most timeoutMs for a lock. */
    abstract Table withTimeout(int timeoutMs);

    /** @return {key code, key tag, value code, value tag} the map recorded when created */
    abstract long[] types();

    /** A native iteration; freed when exhausted or when unreachable. */
    abstract static class Cursor {
        final long it;
        boolean done;
        private final Cleaner.Cleanable cleanable;

        Cursor(long it, Runnable free) {
            this.it = it;
            this.cleanable = CLEANER.register(this, free);
        }

        /** @return {key, value}, or null at the end */
        final byte[][] next() {
            if (done) {
                return null;
            }
            try {
                byte[][] e = next0();
                if (e == null) {
                    done = true;
                    cleanable.clean();
                }
                return e;
            } catch (RuntimeException ex) {
                done = true;
                cleanable.clean();
                throw ex;
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        abstract byte[][] next0();
    }

    /** A map of variable-size keys and values ({@code shoal_map}). */
    static final class Var extends Table {
        final boolean uids;

        Var(NativeApi api, long h, ShoalStore store, String name, boolean uids) {
            super(api, h, store, name, () -> api.mapClose(h));
            this.uids = uids;
        }

        @Override
        byte[] get(byte[] k) {
            try {
                return api.mapGet(h, k);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        boolean put(byte[] k, byte[] v) {
            try {
                return api.mapPut(h, k, v);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        boolean putIfAbsent(byte[] k, byte[] v) {
            try {
                return api.mapPutIfAbsent(h, k, v);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        boolean putIfPresent(byte[] k, byte[] v) {
            try {
                return api.mapPutIfPresent(h, k, v);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        boolean cas(byte[] k, byte[] expected, byte[] update) {
            try {
                return api.mapCas(h, k, expected, update);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        boolean remove(byte[] k) {
            try {
                return api.mapRemove(h, k);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        boolean contains(byte[] k) {
            try {
                return api.mapContains(h, k);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        long add(byte[] k, long delta) {
            try {
                return api.mapAdd(h, k, delta);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        long len() {
            try {
                return api.mapLen(h);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        void clear() {
            try {
                api.mapClear(h);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        byte[][] getMany(byte[][] keys) {
            try {
                return api.mapGetMany(h, keys);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        void putMany(byte[][] keys, byte[][] values) {
            try {
                api.mapPutMany(h, keys, values);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        long removeMany(byte[][] keys) {
            try {
                return api.mapRemoveMany(h, keys);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        long[] types() {
            try {
                return api.mapTypes(h);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        Table withTimeout(int timeoutMs) {
            try {
                return new Var(api, api.mapWithTimeout(h, timeoutMs), store, name, uids);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        long uid(byte[] k) {
            try {
                return api.mapUid(h, k);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        long putUid(byte[] k, byte[] v) {
            try {
                return api.mapPutUid(h, k, v);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        byte[] getByUid(long uid) {
            try {
                return api.mapGetByUid(h, uid);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        byte[] keyByUid(long uid) {
            try {
                return api.mapKeyByUid(h, uid);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        Cursor cursor() {
            long it;
            try {
                it = api.iterOpen(h);
            } finally {
                Reference.reachabilityFence(this);
            }
            // The native iterator holds its own reference to the map: it outlives the handle.
            return new Cursor(it, () -> api.iterClose(it)) {
                @Override
                byte[][] next0() {
                    return api.iterNext(it);
                }
            };
        }
    }

    /** A fixed-size map ({@code shoal_fixed}): every key and value of one length. */
    static final class Fixed extends Table {
        final int keySize;
        final int valueSize;

        Fixed(NativeApi api, long h, ShoalStore store, String name, int keySize, int valueSize) {
            super(api, h, store, name, () -> api.fixedClose(h));
            this.keySize = keySize;
            this.valueSize = valueSize;
        }

        @Override
        byte[] get(byte[] k) {
            try {
                return api.fixedGet(h, k, valueSize);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        boolean put(byte[] k, byte[] v) {
            try {
                return api.fixedPut(h, k, v);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        boolean putIfAbsent(byte[] k, byte[] v) {
            try {
                return api.fixedPutIfAbsent(h, k, v);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        boolean putIfPresent(byte[] k, byte[] v) {
            try {
                return api.fixedPutIfPresent(h, k, v);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        boolean cas(byte[] k, byte[] expected, byte[] update) {
            try {
                return api.fixedCas(h, k, expected, update);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        boolean remove(byte[] k) {
            try {
                return api.fixedRemove(h, k);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        boolean contains(byte[] k) {
            try {
                return api.fixedContains(h, k);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        long add(byte[] k, long delta) {
            try {
                return api.fixedAdd(h, k, delta);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        long len() {
            try {
                return api.fixedLen(h);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        void clear() {
            try {
                api.fixedClear(h);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        byte[][] getMany(byte[][] keys) {
            try {
                return api.fixedGetMany(h, keys, valueSize);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        void putMany(byte[][] keys, byte[][] values) {
            try {
                api.fixedPutMany(h, keys, values);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        long removeMany(byte[][] keys) {
            try {
                return api.fixedRemoveMany(h, keys);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        long[] types() {
            try {
                return api.fixedTypes(h);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        Table withTimeout(int timeoutMs) {
            try {
                return new Fixed(api, api.fixedWithTimeout(h, timeoutMs), store, name, keySize, valueSize);
            } finally {
                Reference.reachabilityFence(this);
            }
        }

        @Override
        Cursor cursor() {
            long it;
            try {
                it = api.fixedIterOpen(h);
            } finally {
                Reference.reachabilityFence(this);
            }
            int ks = keySize;
            int vs = valueSize;
            return new Cursor(it, () -> api.fixedIterClose(it)) {
                @Override
                byte[][] next0() {
                    return api.fixedIterNext(it, ks, vs);
                }
            };
        }
    }
}
