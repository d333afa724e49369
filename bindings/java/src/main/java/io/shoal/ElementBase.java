package io.shoal;

import io.shoal.internal.NativeApi;
import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.lang.ref.WeakReference;
import java.nio.ByteBuffer;

/**
 * What {@link Element} is on every Java version (the Java 22+ class adds a segment view):
 * the element's identity, its state and its bytes. Not public: {@link Element} is the type.
 */
abstract class ElementBase implements AutoCloseable {
    final ShoalQueueSet set;
    final ShoalQueueSet.Held held;
    private final Cleaner.Cleanable cleanable;
    /** The JNI backend's buffer, while a caller keeps it or a view of it; guarded by held. */
    private WeakReference<ByteBuffer> unrevocable;

    ElementBase(ShoalQueueSet set, ShoalQueueSet.Held held) {
        this.set = set;
        this.held = held;
        // An element dropped while held goes back where it came from, as in the other
        // languages, rather than stay held until the process ends.
        this.cleanable = Table.CLEANER.register(this, held);
    }

    /**
     * A direct buffer over the element's bytes in place, with no copy: what it writes the
     * next holder reads, in this process or any other. Each call gives a new buffer
     * (position 0, limit {@link #size()}, big-endian as every new buffer; set
     * {@link ByteBuffer#order} for the little-endian layouts of the other languages).
     *
     * <p>The bytes are this process's only while it holds the element. On Java 22+ a
     * push or {@link #close()} makes every buffer taken before it throw
     * {@link IllegalStateException} on use (a push that fails with
     * {@link QueueFullException} does too: take a new one). The JNI path of Java 17-21
     * cannot revoke a direct buffer: one kept past the push reaches bytes another holder
     * owns, so drop it. Either way the memory stays mapped while a buffer is reachable.
     *
     * @return the buffer
     * @throws ClosedException if the element is no longer held
     */
    public ByteBuffer buffer() {
        synchronized (held) {
            if (held.state != ShoalQueueSet.Held.HELD) {
                throw held.notHeld();
            }
            if (held.region != null) {
                return held.region.buffer().duplicate();
            }
            ByteBuffer raw = unrevocable == null ? null : unrevocable.get();
            if (raw == null) {
                long[] w = held.words;
                NativeApi.Region r = set.api.region(w[NativeApi.E_DATA], (int) w[NativeApi.E_LEN]);
                if (r.revocable()) {
                    held.region = r; // closed at the push or release
                    return r.buffer().duplicate();
                }
                // A buffer that cannot be revoked must not outlive the mapping: while it
                // (or a view of it, which refers to it) is reachable, so is this element,
                // so its set's handle, which keeps the file mapped. Only a weak reference
                // leads back from the element, or the two would keep each other forever.
                raw = r.buffer();
                Table.CLEANER.register(raw, new KeepAlive(this));
                unrevocable = new WeakReference<>(raw);
            }
            return raw.duplicate();
        }
    }

    /** A cleaning action that does nothing but keep its element reachable. */
    private static final class KeepAlive implements Runnable {
        private final Object element;

        KeepAlive(Object element) {
            this.element = element;
        }

        @Override
        public void run() {
            Reference.reachabilityFence(element);
        }
    }

    /** @return the element's size in bytes (the set's element size) */
    public int size() {
        return (int) held.words[NativeApi.E_LEN];
    }

    /** @return the element's index in its set, the same in every process */
    public long index() {
        return held.words[NativeApi.E_INDEX];
    }

    /** @return the queue it was pulled from (its number, as {@link ShoalQueueSet#queue} gives it) */
    public int fromQueue() {
        return (int) held.words[NativeApi.E_FROM];
    }

    /**
     * @return whether it is back in its queue because a process died holding it (sets
     *     created with {@link QueueOptions#redeliver}): the work it carries may be half done
     */
    public boolean redelivered() {
        return held.words[NativeApi.E_REDELIVERED] != 0;
    }

    /** @return whether this process still holds it (neither pushed nor given back) */
    public boolean isHeld() {
        return held.state == ShoalQueueSet.Held.HELD;
    }

    /** Marks the element pushed or given back, for good. */
    final void settle(int state) {
        held.state = state;
        set.held.remove(held);
        cleanable.clean(); // runs the release action, which now finds nothing to do
    }

    /**
     * Gives the element back to the queue it was pulled from (past that queue's depth
     * limit if need be), unless it was pushed; idempotent. It works after its set or
     * store is closed too, so a {@code try}-with-resources block never leaves one held.
     *
     * @throws IllegalStateException (Java 22+) if another thread is using its bytes right
     *     now: it stays held
     */
    @Override
    public void close() {
        ShoalQueueSet.Held h = held;
        if (!h.acquire()) {
            return;
        }
        try {
            h.revoke();
            set.release(h);
        } catch (RuntimeException e) {
            h.state = ShoalQueueSet.Held.HELD;
            throw e;
        }
        settle(ShoalQueueSet.Held.RELEASED);
    }

    @Override
    public String toString() {
        return "Element(" + index() + " of " + set.name() + ", " + size() + " bytes, from queue " + fromQueue()
                + (redelivered() ? ", redelivered" : "") + (isHeld() ? ")" : ", not held)");
    }
}
