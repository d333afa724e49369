package io.shoal;

import io.shoal.internal.NativeApi;
import java.util.List;
import java.util.Objects;

/**
 * An open store: one file of named maps and queue sets shared by every process that opens
 * it. Thread-safe. Close it when done ({@code try}-with-resources); maps, cells and queue
 * sets opened from it then refuse further calls with {@link ClosedException}. Their native
 * handles are freed when they are garbage-collected (they keep the file mapped until
 * then), so a map in use by another thread while the store closes is never freed under it.
 */
public final class ShoalStore implements AutoCloseable {
    private static final int KIND_VARIABLE = 1;
    private static final int KIND_UIDS = 2;
    private static final int KIND_FIXED = 3;

    final NativeApi api;
    private final long h;
    private final String path;
    volatile boolean closed;

    ShoalStore(NativeApi api, String name, long[] opts) {
        this.api = api;
        this.h = api.storeOpen(name, opts);
        String p;
        try {
            p = api.storePath(h);
        } catch (RuntimeException e) {
            api.storeClose(h);
            throw e;
        }
        this.path = p;
    }

    /** @return the store file's path (a bare name resolved to /dev/shm/NAME.shoal) */
    public String path() {
        return path;
    }

    /** @return whether {@link #close()} was called */
    public boolean isClosed() {
        return closed;
    }

    private void live() {
        if (closed) {
            throw new ClosedException(0, "the store " + path + " is closed");
        }
    }

    static void checkText(String s, String what) {
        if (s == null) {
            throw new NullPointerException(what);
        }
        if (s.isEmpty() || s.indexOf('\0') >= 0) {
            throw new InvalidArgumentException(8, what + " must be non-empty and without NUL: " + s);
        }
    }

    /**
     * Opens (creating it if needed) the variable-size map {@code name}. A map created here
     * records the codecs' types ({@link Codec#dataType()}), so that other programs, in any
     * language, decode it without being told; an existing map that recorded other types is
     * refused ({@link InvalidArgumentException} naming both), except by
     * {@link Codecs#BYTES}, which reads any map's raw bytes.
     *
     * @param <K> the key type
     * @param <V> the value type
     * @param name the map's name: 1 to 224 bytes of UTF-8
     * @param keys the key codec
     * @param values the value codec
     * @return the map
     * @throws InvalidArgumentException if {@code name} is a fixed-size map, recorded types
     *     other than the codecs', or a bad name
     * @throws StoreFullException if the store holds its maximum of maps
     */
    public <K, V> ShoalMap<K, V> map(String name, Codec<K> keys, Codec<V> values) {
        return map(name, keys, values, MapOptions.defaults());
    }

    /**
     * Opens (creating it if needed) the variable-size map {@code name} with the codecs its
     * recorded key and value types name ({@link Codecs#forType}): a map another program
     * created with types reads without being told how it is encoded. A map with no types
     * recorded (and one this call creates) has {@link Codecs#BYTES} keys and values.
     * {@link ShoalMap#keyCodec()} says which codec was picked.
     *
     * @param name the map's name
     * @return the map, of the Java types of the picked codecs
     */
    public ShoalMap<Object, Object> map(String name) {
        return map(name, MapOptions.defaults());
    }

    /**
     * {@link #map(String)} with options: whether to create the map, and with UIDs.
     *
     * @param name the map's name
     * @param options creation and UIDs
     * @return the map
     * @throws NotFoundException if the map does not exist and {@code options.create(false)}
     */
    @SuppressWarnings("unchecked")
    public ShoalMap<Object, Object> map(String name, MapOptions options) {
        checkText(name, "map name");
        synchronized (this) {
            live();
            long m = api.mapOpen(h, name, options.create, options.uids, null);
            boolean uids = options.uids;
            if (!uids) {
                long[] kind = api.mapKind(h, name);
                uids = kind != null && kind[0] == KIND_UIDS;
            }
            Table.Var t = new Table.Var(api, m, this, name, uids);
            long[] w = t.types();
            return new ShoalMap<>(t, (Codec<Object>) Codecs.forType(DataType.of(w[0], w[1])),
                    (Codec<Object>) Codecs.forType(DataType.of(w[2], w[3])));
        }
    }

    /** The words that record the codecs' types (a map created) or check them (one opened). */
    private static long[] types(Codec<?> keys, Codec<?> values) {
        DataType k = keys.dataType();
        DataType v = values.dataType();
        if (k == null && v == null) {
            return null;
        }
        return new long[] {k == null ? 0 : k.code(), k == null ? 0 : k.tag(),
                v == null ? 0 : v.code(), v == null ? 0 : v.tag()};
    }

    /**
     * Opens the variable-size map {@code name} with options: whether to create it, and
     * whether a map it creates keeps a stable UID per key.
     *
     * @param <K> the key type
     * @param <V> the value type
     * @param name the map's name: 1 to 224 bytes of UTF-8
     * @param keys the key codec
     * @param values the value codec
     * @param options creation and UIDs
     * @return the map
     * @throws NotFoundException if the map does not exist and {@code options.create(false)}
     */
    public <K, V> ShoalMap<K, V> map(String name, Codec<K> keys, Codec<V> values, MapOptions options) {
        checkText(name, "map name");
        Objects.requireNonNull(keys, "key codec");
        Objects.requireNonNull(values, "value codec");
        synchronized (this) {
            live();
            long m = api.mapOpen(h, name, options.create, options.uids, types(keys, values));
            boolean uids = options.uids;
            if (!uids) {
                long[] kind = api.mapKind(h, name);
                uids = kind != null && kind[0] == KIND_UIDS;
            }
            return new ShoalMap<>(new Table.Var(api, m, this, name, uids), keys, values);
        }
    }

    /**
     * Opens (creating it if needed) the fixed-size map {@code name}, whose keys and values
     * all have the codecs' fixed sizes ({@link Codec#fixedSize()}): stored in the index
     * itself, updated in place, {@link ShoalMap#addAndGet} lock-free on a present key.
     *
     * @param <K> the key type
     * @param <V> the value type
     * @param name the map's name
     * @param keys a key codec of fixed size 1 to 512 ({@link Codecs#LONG}, {@link Codecs#bytes(int)}, ...)
     * @param values a value codec of fixed size 0 to 128
     * @return the map
     * @throws InvalidArgumentException if a codec has no fixed size, or the map exists with
     *     other sizes, recorded other types (see {@link #map(String, Codec, Codec)}) or is a
     *     variable-size map
     */
    public <K, V> ShoalMap<K, V> fixedMap(String name, Codec<K> keys, Codec<V> values) {
        checkText(name, "map name");
        int ks = keys.fixedSize();
        int vs = values.fixedSize();
        if (ks < 1 || vs < 0) {
            throw new InvalidArgumentException(8, "a fixed-size map needs codecs of fixed size ("
                    + keys + ": " + ks + ", " + values + ": " + vs + "); see Codecs.bytes(int)");
        }
        synchronized (this) {
            live();
            long f = api.fixedOpen(h, name, ks, vs, true, types(keys, values));
            return new ShoalMap<>(new Table.Fixed(api, f, this, name, ks, vs), keys, values);
        }
    }

    /**
     * Opens the existing fixed-size map {@code name} with its sizes and the codecs its
     * recorded types name: {@link Codecs#LONG}, {@link Codecs#UNSIGNED_LONG} or
     * {@link Codecs#DOUBLE} for 8-byte numbers, {@link Codecs#bytes(int)} of the map's size
     * for anything else.
     *
     * @param name the map's name
     * @return the map
     * @throws NotFoundException if there is no such map
     * @throws InvalidArgumentException if it is a variable-size map
     */
    @SuppressWarnings("unchecked")
    public ShoalMap<Object, Object> fixedMap(String name) {
        checkText(name, "map name");
        synchronized (this) {
            live();
            long[] kind = api.mapKind(h, name);
            if (kind == null) {
                throw new NotFoundException(1, "no map " + name + " in " + path);
            }
            if (kind[0] != KIND_FIXED) {
                throw new InvalidArgumentException(8, "map " + name + " is not a fixed-size map");
            }
            int ks = (int) kind[1];
            int vs = (int) kind[2];
            long f = api.fixedOpen(h, name, ks, vs, false, null);
            Table.Fixed t = new Table.Fixed(api, f, this, name, ks, vs);
            long[] w = t.types();
            return new ShoalMap<>(t, (Codec<Object>) fixedCodec(DataType.of(w[0], w[1]), ks),
                    (Codec<Object>) fixedCodec(DataType.of(w[2], w[3]), vs));
        }
    }

    private static Codec<?> fixedCodec(DataType type, int size) {
        Codec<?> c = Codecs.forType(type);
        return c.fixedSize() == size ? c : Codecs.bytes(size);
    }

    /**
     * A persisted single value, shared by every process: the map {@code name} holding
     * one entry under the empty key. Created with {@code initial} if absent.
     *
     * @param <T> the value type
     * @param name the cell's map name
     * @param codec the value codec
     * @param initial the value a new cell starts with
     * @return the cell
     */
    public <T> ShoalCell<T> cell(String name, Codec<T> codec, T initial) {
        ShoalMap<byte[], T> m = map(name, Codecs.BYTES, codec);
        return new ShoalCell<>(m, codec, initial);
    }

    /**
     * Opens the queue set {@code name}, creating it with {@code options} if there is none
     * (an existing set keeps its own geometry and queues: {@code options} are not compared
     * with them). The set's elements take room in the file when it is created.
     *
     * @param name the set's name: 1 to 224 bytes of UTF-8, not a map's name
     * @param options the set's geometry and queues
     * @return the set
     * @throws InvalidArgumentException if a map has that name, or an option is out of the
     *     library's range (a queue name too long, too many queues, ...)
     * @throws StoreFullException if the store has no room for the set
     */
    public ShoalQueueSet queueSet(String name, QueueOptions options) {
        checkText(name, "queue set name");
        Objects.requireNonNull(options, "options");
        synchronized (this) {
            live();
            long[] limits = new long[options.limits.size()];
            for (int i = 0; i < limits.length; i++) {
                limits[i] = options.limits.get(i);
            }
            long q = api.queueOpen(h, name, true, options.elementSize, options.elements,
                    options.queues.toArray(new String[0]), limits, options.initial, options.redeliver);
            return new ShoalQueueSet(api, q, this, name);
        }
    }

    /**
     * Opens the existing queue set {@code name}, as another process (in any language)
     * created it.
     *
     * @param name the set's name
     * @return the set
     * @throws NotFoundException if there is no such set
     * @throws InvalidArgumentException if {@code name} is a map
     */
    public ShoalQueueSet queueSet(String name) {
        checkText(name, "queue set name");
        synchronized (this) {
            live();
            long q = api.queueOpen(h, name, false, 0, 0, null, null, null, false);
            return new ShoalQueueSet(api, q, this, name);
        }
    }

    /**
     * The kind of map {@code name} is: "variable", "uids" (variable with UIDs) or
     * "fixed", or null when there is no such map.
     *
     * @param name a map name
     * @return its kind, or null
     */
    public synchronized String mapKind(String name) {
        checkText(name, "map name");
        live();
        long[] k = api.mapKind(h, name);
        if (k == null) {
            return null;
        }
        switch ((int) k[0]) {
            case KIND_VARIABLE: return "variable";
            case KIND_UIDS: return "uids";
            case KIND_FIXED: return "fixed";
            default: return "unknown(" + k[0] + ")";
        }
    }

    /** @return the names of the store's maps */
    public synchronized List<String> maps() {
        live();
        return api.storeMaps(h);
    }

    /**
     * Drops a map and its entries (handles on it then raise {@link NotFoundException}).
     *
     * @param name the map
     * @return false if there was no such map
     */
    public synchronized boolean dropMap(String name) {
        checkText(name, "map name");
        live();
        try {
            api.storeDropMap(h, name);
            return true;
        } catch (NotFoundException e) {
            return false;
        }
    }

    /** Flushes the file to disk (msync + fsync); a no-op cost on tmpfs. */
    public synchronized void flush() {
        live();
        api.storeFlush(h);
    }

    /** Closes the store handle; idempotent. Entries stay in the file. */
    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            api.storeClose(h);
        }
    }

    @Override
    public String toString() {
        return "ShoalStore(" + path + (closed ? ", closed)" : ")");
    }
}
