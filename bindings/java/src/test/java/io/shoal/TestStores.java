package io.shoal;

import java.util.concurrent.atomic.AtomicInteger;

/** Unique store names per test, removed afterwards. */
final class TestStores {
    private static final AtomicInteger N = new AtomicInteger();

    private TestStores() {}

    static String name(String what) {
        return "java-test-" + what + "-" + ProcessHandle.current().pid() + "-" + N.incrementAndGet();
    }

    static void remove(String name) {
        try {
            Shoal.remove(name);
        } catch (NotFoundException e) {
            // Already gone: nothing to clean.
        }
    }
}
