package io.shoal.internal;

/**
 * Picks the backend: on Java 17-21 (this class) JNI; the Java 22+ version of this class,
 * in the jar's META-INF/versions/22, picks the Foreign Function &amp; Memory API.
 * Internal: not part of the API.
 */
public final class Backends {
    private Backends() {}

    private static volatile NativeApi api;

    /** @return the process's backend, loaded on first use */
    public static NativeApi get() {
        NativeApi a = api;
        if (a == null) {
            synchronized (Backends.class) {
                a = api;
                if (a == null) {
                    a = JniNative.load();
                    api = a;
                }
            }
        }
        return a;
    }
}
