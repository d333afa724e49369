package io.shoal.internal;

import java.nio.ByteBuffer;
import java.util.List;

/**
 * The calls of the C API the binding makes, on byte arrays: one implementation per
 * backend (JNI on Java 17-21, the Foreign Function &amp; Memory API on 22+). Handles are
 * the C pointers as longs. Every method throws the {@link Status#exception} of a failed
 * call; expected outcomes (a missing key, a mismatch) come back as return values.
 * Internal: not part of the API.
 */
public interface NativeApi {
    /** Indexes into the options array of {@link #storeOpen}, in {@code shoal_options} order. */
    int OPT_OPEN_MODE = 0, OPT_FILE_MODE = 1, OPT_MAX_SIZE = 2, OPT_INITIAL_SIZE = 3,
            OPT_CHUNK_SIZE = 4, OPT_LOCK_TIMEOUT_MS = 5, OPT_MAX_PROCESSES = 6, OPT_MAX_THREADS = 7,
            OPT_MAX_MAPS = 8, OPT_CHECKSUMS = 9, OPT_SYNC_WRITES = 10, OPT_PRETOUCH = 11, OPT_COUNT = 12;

    /** @return "ffm" or "jni" */
    String backend();

    /** @return {@code shoal_version()} */
    String version();

    /**
     * {@code shoal_store_open}.
     *
     * @param path the path (a bare name means /dev/shm/NAME.shoal)
     * @param opts {@link #OPT_COUNT} option values, 0 for defaults
     * @return the store handle
     */
    long storeOpen(String path, long[] opts);

    /** @param store a store handle to free */
    void storeClose(long store);

    /** @param store a store handle @return the file's path */
    String storePath(long store);

    /** @param store a store handle @return the names of its maps */
    List<String> storeMaps(long store);

    /** @param store a store handle @param name a map to drop */
    void storeDropMap(long store, String name);

    /** @param store a store handle to flush to disk */
    void storeFlush(long store);

    /** @param path a store file to remove */
    void storeDestroy(String path);

    /**
     * {@code shoal_map_kind}.
     *
     * @param store a store handle
     * @param name a map name
     * @return {kind, key size, value size}, or null when there is no such map
     */
    long[] mapKind(long store, String name);

    /**
     * {@code shoal_map_open}.
     *
     * @param store a store handle
     * @param name the map
     * @param create create it if missing
     * @param uids with UIDs
     * @param types {key code, key tag, value code, value tag} to record in a map created
     *     (and that an existing map must have recorded): see {@link #mapTypes}; 0 codes for none
     * @return a map handle
     */
    long mapOpen(long store, String name, boolean create, boolean uids, long[] types);

    /**
     * {@code shoal_map_types}.
     *
     * @param map a map handle
     * @return {key code, key tag, value code, value tag} the map recorded (codes 0: none)
     */
    long[] mapTypes(long map);

    /** @param map a map handle @param timeoutMs its lock timeout @return a second handle */
    long mapWithTimeout(long map, int timeoutMs);

    /** @param map a map handle to free */
    void mapClose(long map);

    /** @param map a map @param key a key @return its value, or null when absent */
    byte[] mapGet(long map, byte[] key);

    /** @param map a map @param key a key @param value the value @return whether it replaced a value */
    boolean mapPut(long map, byte[] key, byte[] value);

    /** @param map a map @param key a key @param value the value @return whether it was inserted */
    boolean mapPutIfAbsent(long map, byte[] key, byte[] value);

    /** @param map a map @param key a key @param value the value @return whether it replaced a value */
    boolean mapPutIfPresent(long map, byte[] key, byte[] value);

    /**
     * {@code shoal_map_compare_and_swap}.
     *
     * @param map a map
     * @param key a key
     * @param expected the expected value, or null for "absent"
     * @param update the new value, or null to remove the key
     * @return whether the value matched (and was replaced)
     */
    boolean mapCas(long map, byte[] key, byte[] expected, byte[] update);

    /** @param map a map @param key a key @return whether it was present (and is removed) */
    boolean mapRemove(long map, byte[] key);

    /** @param map a map @param key a key @return whether it is present */
    boolean mapContains(long map, byte[] key);

    /** @param map a map @param key a key @param delta what to add @return the new value */
    long mapAdd(long map, byte[] key, long delta);

    /** @param map a map @return its number of entries */
    long mapLen(long map);

    /** @param map a map to empty */
    void mapClear(long map);

    /** @param map a map @param keys keys @return their values (null where absent) */
    byte[][] mapGetMany(long map, byte[][] keys);

    /** @param map a map @param keys keys @param values their values */
    void mapPutMany(long map, byte[][] keys, byte[][] values);

    /** @param map a map @param keys keys @return how many were present */
    long mapRemoveMany(long map, byte[][] keys);

    /** @param map a map with UIDs @param key a key @return its UID, 0 when absent */
    long mapUid(long map, byte[] key);

    /** @param map a map with UIDs @param key a key @param value its value @return the key's UID */
    long mapPutUid(long map, byte[] key, byte[] value);

    /** @param map a map with UIDs @param uid a UID @return the value of its key */
    byte[] mapGetByUid(long map, long uid);

    /** @param map a map with UIDs @param uid a UID @return its key */
    byte[] mapKeyByUid(long map, long uid);

    /** @param map a map @return an iterator handle */
    long iterOpen(long map);

    /** @param iter an iterator @return {key, value}, or null at the end */
    byte[][] iterNext(long iter);

    /** @param iter an iterator handle to free */
    void iterClose(long iter);

    /**
     * {@code shoal_fixed_open_with}.
     *
     * @param store a store
     * @param name the map
     * @param keySize key bytes
     * @param valueSize value bytes
     * @param create create it if missing
     * @param types as in {@link #mapOpen}
     * @return a fixed map handle
     */
    long fixedOpen(long store, String name, int keySize, int valueSize, boolean create, long[] types);

    /** @param fixed a fixed map handle @return as {@link #mapTypes} */
    long[] fixedTypes(long fixed);

    /** @param fixed a fixed map handle @param timeoutMs its lock timeout @return a second handle */
    long fixedWithTimeout(long fixed, int timeoutMs);

    /** @param fixed a fixed map handle to free */
    void fixedClose(long fixed);

    /** @param fixed a fixed map @param key a key @param valueSize the map's value size @return its value, or null */
    byte[] fixedGet(long fixed, byte[] key, int valueSize);

    /** @param fixed a fixed map @param key a key @param value the value @return whether it replaced a value */
    boolean fixedPut(long fixed, byte[] key, byte[] value);

    /** @param fixed a fixed map @param key a key @param value the value @return whether it was inserted */
    boolean fixedPutIfAbsent(long fixed, byte[] key, byte[] value);

    /** @param fixed a fixed map @param key a key @param value the value @return whether it replaced a value */
    boolean fixedPutIfPresent(long fixed, byte[] key, byte[] value);

    /** @param fixed a fixed map @param key a key @param expected null for absent @param update null to remove @return whether it matched */
    boolean fixedCas(long fixed, byte[] key, byte[] expected, byte[] update);

    /** @param fixed a fixed map @param key a key @return whether it was present */
    boolean fixedRemove(long fixed, byte[] key);

    /** @param fixed a fixed map @param key a key @return whether it is present */
    boolean fixedContains(long fixed, byte[] key);

    /** @param fixed a fixed map of 8-byte values @param key a key @param delta what to add @return the new value */
    long fixedAdd(long fixed, byte[] key, long delta);

    /** @param fixed a fixed map @return its number of entries */
    long fixedLen(long fixed);

    /** @param fixed a fixed map to empty */
    void fixedClear(long fixed);

    /** @param fixed a fixed map @param keys keys @param valueSize the value size @return values, null where absent */
    byte[][] fixedGetMany(long fixed, byte[][] keys, int valueSize);

    /** @param fixed a fixed map @param keys keys @param values their values */
    void fixedPutMany(long fixed, byte[][] keys, byte[][] values);

    /** @param fixed a fixed map @param keys keys @return how many were present */
    long fixedRemoveMany(long fixed, byte[][] keys);

    /** @param fixed a fixed map @return an iterator handle */
    long fixedIterOpen(long fixed);

    /** @param iter an iterator @param keySize key bytes @param valueSize value bytes @return {key, value} or null */
    byte[][] fixedIterNext(long iter, int keySize, int valueSize);

    /** @param iter an iterator handle to free */
    void fixedIterClose(long iter);

    // ---- queue sets --------------------------------------------------------------------

    /**
     * Indexes into the words of one element ({@code shoal_element}) in the arrays of the
     * queue calls: its address in this process, its size, its index in the set, the queue
     * it was pulled from, and 1 if it was redelivered.
     */
    int E_DATA = 0, E_LEN = 1, E_INDEX = 2, E_FROM = 3, E_REDELIVERED = 4, E_WORDS = 5;

    /**
     * {@code shoal_queue_open}.
     *
     * @param store a store handle
     * @param name the set's name
     * @param create create the set with these options if it is missing (else: open an
     *     existing one, {@link io.shoal.NotFoundException} if there is none)
     * @param elementSize bytes per element
     * @param elements elements in the set
     * @param queues the names of the queues besides {@code free}
     * @param limits the depth limit of each of {@code queues} (0: none)
     * @param initial the queue elements start in, or null for {@code free}
     * @param redeliver a dead holder's elements go back to the queue they came from
     * @return a queue set handle
     */
    long queueOpen(long store, String name, boolean create, long elementSize, long elements, String[] queues,
            long[] limits, String initial, boolean redeliver);

    /** @param set a queue set handle to free */
    void queueClose(long set);

    /** @param set a queue set @param name a queue's name @return its index */
    int queueIndex(long set, String name);

    /**
     * {@code shoal_queue_pull}.
     *
     * @param set a queue set
     * @param q a queue index
     * @param timeoutMs how long to wait for a push if the queue is empty (0: not at all)
     * @param out receives the element's {@link #E_WORDS} words
     * @return false if no element came
     */
    boolean queuePull(long set, int q, long timeoutMs, long[] out);

    /**
     * {@code shoal_queue_pull_many}.
     *
     * @param set a queue set
     * @param q a queue index
     * @param max at most this many, and {@code out} has room for their words
     * @param out receives {@link #E_WORDS} words per element
     * @return how many were pulled
     */
    int queuePullMany(long set, int q, int max, long[] out);

    /** @param set a queue set @param q a queue index @param e an element's words */
    void queuePush(long set, int q, long[] e);

    /** @param set a queue set @param q a queue index @param elems n elements' words @param n how many */
    void queuePushMany(long set, int q, long[] elems, int n);

    /** @param set a queue set @param e the words of an element to give back where it came from */
    void queueRelease(long set, long[] e);

    /** @param set a queue set @param from a queue @param to another @param max at most this many @return how many moved */
    long queueMove(long set, int from, int to, long max);

    /** @param set a queue set @param q a queue index @return its length */
    long queueLen(long set, int q);

    /** @param set a queue set @return how many elements of dead holders went back */
    long queueReclaim(long set);

    /**
     * {@code shoal_queue_pull_any}.
     *
     * @param set a queue set
     * @param queues queue indexes, looked at in this order
     * @param timeoutMs how long to wait for a push if all are empty (0: not at all)
     * @param out receives the element's {@link #E_WORDS} words
     * @return false if no element came
     */
    boolean queuePullAny(long set, int[] queues, long timeoutMs, long[] out);

    /** @param set a queue set @return element size, elements, queues ({@code shoal_queue_get_info}) */
    long[] queueInfo(long set);

    /** @param set a queue set @param q a queue index @return its name */
    String queueName(long set, int q);

    /** @param set a queue set @param q a queue index @return len, limit, pushes, pulls, waits */
    long[] queueStats(long set, int q);

    /** @param set a queue set @return (pid, elements held) pairs, one per holding process */
    long[] queueHolders(long set);

    /**
     * Views of an element's bytes in place.
     *
     * @param address the element's first byte in this process
     * @param length its size
     * @return the views
     */
    Region region(long address, int length);

    /** The bytes of a held element, seen from Java with no copy. */
    interface Region {
        /** @return a direct buffer over the bytes (the same one each time) */
        ByteBuffer buffer();

        /**
         * @return whether {@link #revoke} makes the buffers unusable (FFM: they belong to an
         *     arena it closes); JNI cannot revoke a direct buffer
         */
        boolean revocable();

        /**
         * Makes every buffer and segment over the bytes throw on use, if {@link #revocable}.
         *
         * @throws IllegalStateException if another thread is using them right now
         */
        void revoke();
    }
}
