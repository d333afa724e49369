package io.shoal;

import java.util.AbstractCollection;
import java.util.AbstractMap;
import java.util.AbstractSet;
import java.util.Collection;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Objects;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.ConcurrentMap;
import java.util.function.BiFunction;
import java.util.function.Function;

/**
 * A map of a store, shared by every thread and process that opens it: a
 * {@link ConcurrentMap} with the contract of {@link java.util.concurrent.ConcurrentHashMap}.
 * Null keys and values are refused ({@link NullPointerException}). Each single-key call is
 * atomic across processes. Iterators and views are weakly consistent: they never throw
 * {@link java.util.ConcurrentModificationException}, return every key present for the whole
 * iteration exactly once, and may or may not show changes made meanwhile;
 * {@link Iterator#remove()} removes the last key returned.
 *
 * <p>Values compare by their encoded bytes in {@link #replace(Object, Object, Object)},
 * {@link #remove(Object, Object)} and the retries of {@code compute}/{@code merge}.
 * {@link #compute}, {@link #computeIfAbsent}, {@link #computeIfPresent} and {@link #merge}
 * run the function with no lock held: they read the value, apply the function, and install
 * the result with a compare-and-swap, retrying on the newer value if another writer came in
 * between. So the function may run more than once (keep it free of side effects), and a
 * function that throws, or a JVM killed while it runs, leaves nothing locked or half-written.
 *
 * <p>A map comes from {@link ShoalStore#map} (variable-size keys and values) or
 * {@link ShoalStore#fixedMap} (fixed sizes, stored in the index itself).
 *
 * @param <K> the key type
 * @param <V> the value type
 */
public final class ShoalMap<K, V> extends AbstractMap<K, V> implements ConcurrentMap<K, V> {
    private final Table t;
    private final Codec<K> kc;
    private final Codec<V> vc;

    ShoalMap(Table t, Codec<K> kc, Codec<V> vc) {
        this.t = t;
        this.kc = Objects.requireNonNull(kc, "key codec");
        this.vc = Objects.requireNonNull(vc, "value codec");
    }

    /** @return the map's name in its store */
    public String name() {
        return t.name;
    }

    /** @return the store it belongs to */
    public ShoalStore store() {
        return t.store;
    }

    /**
     * The key type the map recorded when it was created (FORMAT.md, "Key and value
     * types"), which tells every language how its keys are encoded.
     *
     * @return the type, or null when none was recorded
     */
    public DataType keyType() {
        t.live();
        long[] w = t.types();
        return DataType.of(w[0], w[1]);
    }

    /**
     * The value type the map recorded when it was created.
     *
     * @return the type, or null when none was recorded
     */
    public DataType valueType() {
        t.live();
        long[] w = t.types();
        return DataType.of(w[2], w[3]);
    }

    /** @return the codec of the keys (for a map opened without codecs: the one its key type names) */
    public Codec<K> keyCodec() {
        return kc;
    }

    /** @return the codec of the values */
    public Codec<V> valueCodec() {
        return vc;
    }

    /** @return whether this is a fixed-size map */
    public boolean isFixed() {
        return t instanceof Table.Fixed;
    }

    @SuppressWarnings("unchecked")
    private byte[] k(Object key) {
        Objects.requireNonNull(key, "key");
        t.live();
        byte[] b = kc.encode((K) key);
        if (b == null) {
            throw new CodecException(0, "the key codec returned null");
        }
        return b;
    }

    private byte[] v(V value) {
        Objects.requireNonNull(value, "value");
        byte[] b = vc.encode(value);
        if (b == null) {
            throw new CodecException(0, "the value codec returned null");
        }
        return b;
    }

    private V dv(byte[] b) {
        return b == null ? null : vc.decode(b);
    }

    /**
     * A view of the same map whose calls wait at most {@code timeout} for a lock held by
     * a live process before raising {@link ShoalTimeoutException} (the store's
     * {@link Options#lockTimeout} applies to other views).
     *
     * @param timeout the wait, at least a millisecond
     * @return the view
     */
    public ShoalMap<K, V> withLockTimeout(java.time.Duration timeout) {
        long ms = timeout.toMillis();
        if (ms < 1 || ms > 0xffff_ffffL) {
            throw new IllegalArgumentException("lock timeout out of range: " + timeout);
        }
        t.live();
        return new ShoalMap<>(t.withTimeout((int) Math.min(ms, Integer.MAX_VALUE)), kc, vc);
    }

    // ---- reads -----------------------------------------------------------------------

    @Override
    public V get(Object key) {
        return dv(t.get(k(key)));
    }

    @Override
    public V getOrDefault(Object key, V defaultValue) {
        V v = get(key);
        return v == null ? defaultValue : v;
    }

    @Override
    public boolean containsKey(Object key) {
        return t.contains(k(key));
    }

    /** Scans the whole map (as {@link java.util.concurrent.ConcurrentHashMap} does). */
    @Override
    public boolean containsValue(Object value) {
        Objects.requireNonNull(value, "value");
        return super.containsValue(value);
    }

    @Override
    public int size() {
        long n = mappingCount();
        return n > Integer.MAX_VALUE ? Integer.MAX_VALUE : (int) n;
    }

    /**
     * The number of entries, which may exceed {@link Integer#MAX_VALUE}.
     *
     * @return the count at one instant
     */
    public long mappingCount() {
        t.live();
        return t.len();
    }

    @Override
    public boolean isEmpty() {
        return mappingCount() == 0;
    }

    // ---- writes ----------------------------------------------------------------------

    /**
     * Stores a value and returns the previous one: a read and a compare-and-swap, retried
     * if another writer came in between. {@link #set} is the one-call form when the
     * previous value is not needed.
     */
    @Override
    public V put(K key, V value) {
        byte[] kb = k(key);
        byte[] vb = v(value);
        for (;;) {
            byte[] cur = t.get(kb);
            if (t.cas(kb, cur, vb)) {
                return dv(cur);
            }
            Thread.onSpinWait();
        }
    }

    /**
     * Stores a value without reading the previous one: one call into the engine.
     *
     * @param key the key
     * @param value the value
     * @return whether a value was replaced (false: inserted)
     */
    public boolean set(K key, V value) {
        return t.put(k(key), v(value));
    }

    @Override
    public V putIfAbsent(K key, V value) {
        byte[] kb = k(key);
        byte[] vb = v(value);
        for (;;) {
            if (t.putIfAbsent(kb, vb)) {
                return null;
            }
            byte[] cur = t.get(kb);
            if (cur != null) {
                return dv(cur);
            }
            // Removed between the two calls: try the insert again.
            Thread.onSpinWait();
        }
    }

    @Override
    public V replace(K key, V value) {
        byte[] kb = k(key);
        byte[] vb = v(value);
        for (;;) {
            byte[] cur = t.get(kb);
            if (cur == null) {
                return null;
            }
            if (t.cas(kb, cur, vb)) {
                return dv(cur);
            }
            Thread.onSpinWait();
        }
    }

    @Override
    public boolean replace(K key, V oldValue, V newValue) {
        byte[] kb = k(key);
        Objects.requireNonNull(oldValue, "oldValue");
        return t.cas(kb, v(oldValue), v(newValue));
    }

    @Override
    public V remove(Object key) {
        byte[] kb = k(key);
        for (;;) {
            byte[] cur = t.get(kb);
            if (cur == null) {
                return null;
            }
            if (t.cas(kb, cur, null)) {
                return dv(cur);
            }
            Thread.onSpinWait();
        }
    }

    /**
     * Removes a key without reading its value: one call into the engine.
     *
     * @param key the key
     * @return whether it was present
     */
    public boolean delete(K key) {
        return t.remove(k(key));
    }

    @Override
    @SuppressWarnings("unchecked")
    public boolean remove(Object key, Object value) {
        if (value == null) {
            return false;
        }
        byte[] kb = k(key);
        return t.cas(kb, v((V) value), null);
    }

    @Override
    public void clear() {
        t.live();
        t.clear();
    }

    /**
     * Adds {@code delta} (wrapping) to a value in the {@link Codecs#LONG} layout, atomically
     * in the engine (lock-free on a present key of a fixed-size map). An absent key counts
     * as 0 and is created.
     *
     * @param key the key
     * @param delta what to add
     * @return the new value
     * @throws InvalidArgumentException if the current value is not 8 bytes long
     */
    public long addAndGet(K key, long delta) {
        return t.add(k(key), delta);
    }

    // ---- functions, with no lock held ------------------------------------------------

    @Override
    public V computeIfAbsent(K key, Function<? super K, ? extends V> fn) {
        Objects.requireNonNull(fn, "function");
        byte[] kb = k(key);
        for (;;) {
            byte[] cur = t.get(kb);
            if (cur != null) {
                return dv(cur);
            }
            V nv = fn.apply(key);
            if (nv == null) {
                return null;
            }
            if (t.putIfAbsent(kb, v(nv))) {
                return nv;
            }
            Thread.onSpinWait();
        }
    }

    @Override
    public V computeIfPresent(K key, BiFunction<? super K, ? super V, ? extends V> fn) {
        Objects.requireNonNull(fn, "function");
        byte[] kb = k(key);
        for (;;) {
            byte[] cur = t.get(kb);
            if (cur == null) {
                return null;
            }
            V nv = fn.apply(key, dv(cur));
            if (t.cas(kb, cur, nv == null ? null : v(nv))) {
                return nv;
            }
            Thread.onSpinWait();
        }
    }

    @Override
    public V compute(K key, BiFunction<? super K, ? super V, ? extends V> fn) {
        Objects.requireNonNull(fn, "function");
        byte[] kb = k(key);
        for (;;) {
            byte[] cur = t.get(kb);
            V nv = fn.apply(key, dv(cur));
            if (nv == null && cur == null) {
                return null;
            }
            if (t.cas(kb, cur, nv == null ? null : v(nv))) {
                return nv;
            }
            Thread.onSpinWait();
        }
    }

    @Override
    public V merge(K key, V value, BiFunction<? super V, ? super V, ? extends V> fn) {
        Objects.requireNonNull(fn, "function");
        byte[] kb = k(key);
        byte[] given = v(value);
        for (;;) {
            byte[] cur = t.get(kb);
            if (cur == null) {
                if (t.putIfAbsent(kb, given)) {
                    return value;
                }
            } else {
                V nv = fn.apply(dv(cur), value);
                if (t.cas(kb, cur, nv == null ? null : v(nv))) {
                    return nv;
                }
            }
            Thread.onSpinWait();
        }
    }

    // ---- batches ---------------------------------------------------------------------

    /**
     * Looks up many keys in one call into the engine (their memory misses overlap).
     * Each lookup is atomic on its own, the batch is not.
     *
     * @param keys the keys
     * @return the present keys and their values, in the keys' order
     */
    public Map<K, V> getAll(Collection<? extends K> keys) {
        byte[][] kb = new byte[keys.size()][];
        Object[] ks = new Object[kb.length];
        int i = 0;
        for (K key : keys) {
            ks[i] = key;
            kb[i++] = k(key);
        }
        byte[][] vb = t.getMany(kb);
        Map<K, V> out = new LinkedHashMap<>();
        for (i = 0; i < kb.length; i++) {
            if (vb[i] != null) {
                @SuppressWarnings("unchecked")
                K key = (K) ks[i];
                out.put(key, vc.decode(vb[i]));
            }
        }
        return out;
    }

    /**
     * Stores every entry in one call into the engine: each put is atomic on its own, the
     * batch is not; on an error the entries before the failing one stay written.
     */
    @Override
    public void putAll(Map<? extends K, ? extends V> m) {
        byte[][] kb = new byte[m.size()][];
        byte[][] vb = new byte[kb.length][];
        int i = 0;
        for (Map.Entry<? extends K, ? extends V> e : m.entrySet()) {
            if (i == kb.length) {
                break;
            }
            kb[i] = k(e.getKey());
            vb[i++] = v(e.getValue());
        }
        if (i < kb.length) {
            kb = java.util.Arrays.copyOf(kb, i);
            vb = java.util.Arrays.copyOf(vb, i);
        }
        t.putMany(kb, vb);
    }

    /**
     * Removes many keys in one call into the engine (each removal atomic on its own).
     *
     * @param keys the keys
     * @return how many were present
     */
    public long removeAll(Collection<? extends K> keys) {
        byte[][] kb = new byte[keys.size()][];
        int i = 0;
        for (K key : keys) {
            kb[i++] = k(key);
        }
        return t.removeMany(kb);
    }

    // ---- UIDs ------------------------------------------------------------------------

    private Table.Var uidTable() {
        if (!(t instanceof Table.Var) || !((Table.Var) t).uids) {
            throw new InvalidArgumentException(8, "the map " + t.name + " has no UIDs"
                    + " (create it with MapOptions.defaults().uids(true))");
        }
        return (Table.Var) t;
    }

    /** @return whether the map keeps a stable UID per key */
    public boolean hasUids() {
        return t instanceof Table.Var && ((Table.Var) t).uids;
    }

    /**
     * The stable UID of a key: valid while the key exists, whatever its value.
     *
     * @param key the key
     * @return its UID, or empty when absent
     */
    public OptionalLong uid(K key) {
        byte[] kb = k(key);
        long u = uidTable().uid(kb);
        return u == 0 ? OptionalLong.empty() : OptionalLong.of(u);
    }

    /**
     * {@link #set} that returns the key's UID (the one it had if it was present).
     *
     * @param key the key
     * @param value the value
     * @return the key's UID
     */
    public long putWithUid(K key, V value) {
        byte[] kb = k(key);
        return uidTable().putUid(kb, v(value));
    }

    /**
     * The value of the key a UID names, without hashing the key.
     *
     * @param uid a UID from {@link #uid} or {@link #putWithUid}
     * @return the value
     * @throws StaleUidException if the key was removed
     */
    public V getByUid(long uid) {
        t.live();
        return vc.decode(uidTable().getByUid(uid));
    }

    /**
     * The key a UID names.
     *
     * @param uid a UID
     * @return the key
     * @throws StaleUidException if the key was removed
     */
    public K keyByUid(long uid) {
        t.live();
        return kc.decode(uidTable().keyByUid(uid));
    }

    // ---- views -----------------------------------------------------------------------

    private transient Set<K> keySet;
    private transient Collection<V> values;
    private transient Set<Map.Entry<K, V>> entrySet;

    @Override
    public Set<K> keySet() {
        Set<K> s = keySet;
        if (s == null) {
            s = new AbstractSet<K>() {
                @Override
                public Iterator<K> iterator() {
                    Iterator<Map.Entry<K, V>> it = new EntryIterator();
                    return new Iterator<K>() {
                        @Override
                        public boolean hasNext() {
                            return it.hasNext();
                        }

                        @Override
                        public K next() {
                            return it.next().getKey();
                        }

                        @Override
                        public void remove() {
                            it.remove();
                        }
                    };
                }

                @Override
                public int size() {
                    return ShoalMap.this.size();
                }

                @Override
                public boolean contains(Object o) {
                    return containsKey(o);
                }

                @Override
                @SuppressWarnings("unchecked")
                public boolean remove(Object o) {
                    return delete((K) o);
                }

                @Override
                public void clear() {
                    ShoalMap.this.clear();
                }
            };
            keySet = s;
        }
        return s;
    }

    @Override
    public Collection<V> values() {
        Collection<V> c = values;
        if (c == null) {
            c = new AbstractCollection<V>() {
                @Override
                public Iterator<V> iterator() {
                    Iterator<Map.Entry<K, V>> it = new EntryIterator();
                    return new Iterator<V>() {
                        @Override
                        public boolean hasNext() {
                            return it.hasNext();
                        }

                        @Override
                        public V next() {
                            return it.next().getValue();
                        }

                        @Override
                        public void remove() {
                            it.remove();
                        }
                    };
                }

                @Override
                public int size() {
                    return ShoalMap.this.size();
                }

                @Override
                public void clear() {
                    ShoalMap.this.clear();
                }
            };
            values = c;
        }
        return c;
    }

    @Override
    public Set<Map.Entry<K, V>> entrySet() {
        Set<Map.Entry<K, V>> s = entrySet;
        if (s == null) {
            s = new AbstractSet<Map.Entry<K, V>>() {
                @Override
                public Iterator<Map.Entry<K, V>> iterator() {
                    return new EntryIterator();
                }

                @Override
                public int size() {
                    return ShoalMap.this.size();
                }

                @Override
                public boolean contains(Object o) {
                    if (!(o instanceof Map.Entry)) {
                        return false;
                    }
                    Map.Entry<?, ?> e = (Map.Entry<?, ?>) o;
                    Object key = e.getKey();
                    Object val = e.getValue();
                    if (key == null || val == null) {
                        return false;
                    }
                    @SuppressWarnings("unchecked")
                    byte[] want = vc.encode((V) val);
                    byte[] have = t.get(k(key));
                    return have != null && java.util.Arrays.equals(want, have);
                }

                @Override
                public boolean remove(Object o) {
                    if (!(o instanceof Map.Entry)) {
                        return false;
                    }
                    Map.Entry<?, ?> e = (Map.Entry<?, ?>) o;
                    return e.getKey() != null && ShoalMap.this.remove(e.getKey(), e.getValue());
                }

                @Override
                public void clear() {
                    ShoalMap.this.clear();
                }
            };
            entrySet = s;
        }
        return s;
    }

    /**
     * An entry as iterated; {@link #setValue} writes through to the map (as
     * ConcurrentHashMap's entries do) and returns the value this entry held.
     */
    private final class Entry extends AbstractMap.SimpleEntry<K, V> {
        private static final long serialVersionUID = 1L;

        Entry(K key, V value) {
            super(key, value);
        }

        @Override
        public V setValue(V value) {
            V old = super.setValue(Objects.requireNonNull(value, "value"));
            ShoalMap.this.set(getKey(), value);
            return old;
        }
    }

    private final class EntryIterator implements Iterator<Map.Entry<K, V>> {
        private final Table.Cursor cursor;
        private byte[][] next;
        private byte[] lastKey;

        EntryIterator() {
            t.live();
            cursor = t.cursor();
        }

        @Override
        public boolean hasNext() {
            if (next == null) {
                next = cursor.next();
            }
            return next != null;
        }

        @Override
        public Map.Entry<K, V> next() {
            if (!hasNext()) {
                throw new NoSuchElementException();
            }
            byte[][] e = next;
            next = null;
            lastKey = e[0];
            return new Entry(kc.decode(e[0]), vc.decode(e[1]));
        }

        @Override
        public void remove() {
            if (lastKey == null) {
                throw new IllegalStateException("next() first");
            }
            t.live();
            t.remove(lastKey);
            lastKey = null;
        }
    }

    @Override
    public String toString() {
        return "ShoalMap(" + t.name + " in " + t.store.path() + ")";
    }
}
