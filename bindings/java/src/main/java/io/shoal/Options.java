package io.shoal;

import io.shoal.internal.NativeApi;
import java.time.Duration;

/**
 * Options of {@link Shoal#open(String, Options)}: a builder whose setters return it, every
 * value left unset taking the library's default. Sizes and table sizes apply when the
 * store is created and are then fixed in its file; the lock timeout, sync writes and
 * pre-touching apply to this process only.
 *
 * <pre>{@code
 * Shoal.open("cache", Options.defaults().maxSize(1L << 30).lockTimeout(Duration.ofSeconds(2)))
 * }</pre>
 */
public final class Options {
    private final long[] v = new long[NativeApi.OPT_COUNT];

    private Options() {}

    /** @return options with every value at its default */
    public static Options defaults() {
        return new Options();
    }

    /**
     * @param mode how an existing or missing file is treated (default {@link OpenMode#OPEN_OR_CREATE})
     * @return this
     */
    public Options openMode(OpenMode mode) {
        v[NativeApi.OPT_OPEN_MODE] = mode.ordinal();
        return this;
    }

    /**
     * @param mode permission bits of a new file, at most 07777 (default 0600)
     * @return this
     */
    public Options fileMode(int mode) {
        v[NativeApi.OPT_FILE_MODE] = check(mode, 1, 07777, "fileMode");
        return this;
    }

    /**
     * @param bytes the largest size the file may grow to; reserved as address space, not
     *     memory (default 1 TiB, at most 2^48)
     * @return this
     */
    public Options maxSize(long bytes) {
        v[NativeApi.OPT_MAX_SIZE] = check(bytes, 1, 1L << 48, "maxSize");
        return this;
    }

    /**
     * @param bytes bytes allocated when the store is created (default: just its tables)
     * @return this
     */
    public Options initialSize(long bytes) {
        v[NativeApi.OPT_INITIAL_SIZE] = check(bytes, 1, 1L << 48, "initialSize");
        return this;
    }

    /**
     * @param bytes the unit of file growth: a power of two from 64 KiB to 64 MiB (default 256 KiB)
     * @return this
     */
    public Options chunkSize(long bytes) {
        v[NativeApi.OPT_CHUNK_SIZE] = check(bytes, 1, 1L << 26, "chunkSize");
        return this;
    }

    /**
     * @param timeout how long a call waits for a lock held by a live process before it
     *     raises {@link ShoalTimeoutException} (default 5 s; locks of dead processes are
     *     recovered within milliseconds whatever this is)
     * @return this
     */
    public Options lockTimeout(Duration timeout) {
        v[NativeApi.OPT_LOCK_TIMEOUT_MS] = check(Math.max(1, timeout.toMillis()), 1, 0xffff_ffffL, "lockTimeout");
        return this;
    }

    /**
     * @param n processes that may have the store open at once, 1 to 65535 (default 1024)
     * @return this
     */
    public Options maxProcesses(int n) {
        v[NativeApi.OPT_MAX_PROCESSES] = check(n, 1, 65535, "maxProcesses");
        return this;
    }

    /**
     * @param n threads, over all processes, that may use the store at once, 1 to 2^20 (default 1024)
     * @return this
     */
    public Options maxThreads(int n) {
        v[NativeApi.OPT_MAX_THREADS] = check(n, 1, 1 << 20, "maxThreads");
        return this;
    }

    /**
     * @param n named maps the store can hold, 1 to 65536 (default 1024)
     * @return this
     */
    public Options maxMaps(int n) {
        v[NativeApi.OPT_MAX_MAPS] = check(n, 1, 65536, "maxMaps");
        return this;
    }

    /**
     * @param on whether records end with a CRC32C (default: on for files on disk, off on tmpfs)
     * @return this
     */
    public Options checksums(boolean on) {
        v[NativeApi.OPT_CHECKSUMS] = on ? 1 : 2;
        return this;
    }

    /**
     * @param on flush after every write call, so that each acknowledged write survives an
     *     OS crash (files on disk only; default off)
     * @return this
     */
    public Options syncWrites(boolean on) {
        v[NativeApi.OPT_SYNC_WRITES] = on ? 1 : 0;
        return this;
    }

    /**
     * @param on whether a background thread faults in pages ahead of the writers (tmpfs
     *     only; default on)
     * @return this
     */
    public Options pretouch(boolean on) {
        v[NativeApi.OPT_PRETOUCH] = on ? 1 : 2;
        return this;
    }

    long[] values() {
        return v.clone();
    }

    private static long check(long x, long lo, long hi, String what) {
        if (x < lo || x > hi) {
            throw new IllegalArgumentException(what + " out of range [" + lo + ", " + hi + "]: " + x);
        }
        return x;
    }
}
