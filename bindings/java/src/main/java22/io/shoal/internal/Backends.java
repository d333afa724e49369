package io.shoal.internal;

/**
 * Picks the backend on Java 22+: the Foreign Function &amp; Memory API, or JNI when the
 * system property {@code shoal.backend} is {@code jni} (to compare the two, or to test the
 * JNI path on a newer JDK). Internal: not part of the API.
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
                    a = "jni".equals(System.getProperty("shoal.backend")) ? JniNative.load() : FfmNative.load();
                    api = a;
                }
            }
        }
        return a;
    }
}
