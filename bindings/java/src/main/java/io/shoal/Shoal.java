package io.shoal;

import io.shoal.internal.Backends;
import java.nio.file.Path;

/**
 * Entry point: opens stores. A store is one file (in {@code /dev/shm} by default) of named
 * maps that every process opening it reads and writes directly, whatever its language.
 *
 * <pre>{@code
 * try (ShoalStore store = Shoal.open("demo")) {          // /dev/shm/demo.shoal
 *     ShoalMap<String, Long> hits = store.map("hits", Codecs.STRING, Codecs.LONG);
 *     hits.merge("/", 1L, Long::sum);
 *     hits.addAndGet("/", 1);                             // atomic in the engine
 * }
 * }</pre>
 */
public final class Shoal {
    private Shoal() {}

    /**
     * Opens (or creates) a store with default options.
     *
     * @param name a path, or a bare name without '/' meaning {@code /dev/shm/NAME.shoal}
     * @return the open store
     */
    public static ShoalStore open(String name) {
        return open(name, Options.defaults());
    }

    /**
     * Opens (or creates) a store.
     *
     * @param name a path, or a bare name without '/' meaning {@code /dev/shm/NAME.shoal}
     * @param options how to open it
     * @return the open store
     * @throws NotFoundException, AlreadyExistsException, CorruptStoreException, ... as the
     *     open mode and the file dictate
     */
    public static ShoalStore open(String name, Options options) {
        ShoalStore.checkText(name, "store name");
        return new ShoalStore(Backends.get(), name, options.values());
    }

    /**
     * Opens (or creates) the store file at {@code path}.
     *
     * @param path the file
     * @param options how to open it
     * @return the open store
     */
    public static ShoalStore open(Path path, Options options) {
        String p = path.toString();
        // A relative path without '/' would otherwise read as a bare name in /dev/shm.
        return open(p.contains("/") ? p : "./" + p, options);
    }

    /**
     * Opens (or creates) the store file at {@code path} with default options.
     *
     * @param path the file
     * @return the open store
     */
    public static ShoalStore open(Path path) {
        return open(path, Options.defaults());
    }

    /**
     * Removes a store file (processes that have it open keep their mapping).
     *
     * @param name a path or bare name, as for {@link #open(String)}
     * @throws NotFoundException if there is no such file
     */
    public static void remove(String name) {
        ShoalStore.checkText(name, "store name");
        Backends.get().storeDestroy(name);
    }

    /** @return the native library's version, e.g. "0.1.0" */
    public static String version() {
        return Backends.get().version();
    }

    /**
     * @return how this JVM reaches the library: "ffm" (Foreign Function &amp; Memory API,
     *     Java 22+) or "jni" (Java 17-21, or {@code -Dshoal.backend=jni})
     */
    public static String backend() {
        return Backends.get().backend();
    }
}
