package io.shoal;

import io.shoal.internal.NativeApi;
import java.lang.ref.Reference;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;

/**
 * A queue set of a store ({@link ShoalStore#queueSet}): a pool of fixed-size elements in
 * the file and named queues that pass them between processes, in any language, by
 * reference. A producer pulls a free element, writes it in place and pushes it on; a
 * consumer pulls it, reads it in place, and pushes it on or back. Queues are first in,
 * first out, and known by number ({@link #queue(String)}). Thread-safe.
 *
 * <pre>{@code
 * try (ShoalQueueSet frames = store.queueSet("frames", QueueOptions.of(4096, 64).queue("ready", 16))) {
 *     int free = frames.queue("free"), ready = frames.queue("ready");
 *     try (Element e = frames.pull(free, Duration.ofSeconds(1))) {   // null if none came
 *         e.buffer().put(pixels);
 *         frames.push(ready, e);
 *     }
 * }
 * }</pre>
 *
 * Every element is at every moment in exactly one queue or held by one process. If a
 * process dies holding elements, they go back by themselves (to the set's initial queue,
 * or with {@link QueueOptions#redeliver} to the queue each came from, marked
 * {@link Element#redelivered()}): a pull that finds its queue empty looks for dead
 * holders, and {@link #reclaim()} does it at once.
 *
 * <p>{@link #close()} gives back the elements still held through this handle; calls on
 * it then throw {@link ClosedException}, as they do once its store is closed (an
 * element's {@link Element#close()} still works). The native handle is freed when the
 * set and its elements are garbage-collected, never under a call in another thread.
 */
public final class ShoalQueueSet implements AutoCloseable {
    final NativeApi api;
    final long h;
    private final ShoalStore store;
    private final String name;
    private volatile boolean closed;
    /** The elements held through this handle, which {@link #close()} gives back. */
    final Set<Held> held = ConcurrentHashMap.newKeySet();

    ShoalQueueSet(NativeApi api, long h, ShoalStore store, String name) {
        this.api = api;
        this.h = h;
        this.store = store;
        this.name = name;
        Table.CLEANER.register(this, closer(api, h));
    }

    private static Runnable closer(NativeApi api, long h) {
        return () -> api.queueClose(h);
    }

    /**
     * One held element's words and state, shared by its {@link Element} and the action
     * that gives it back when the Element is garbage-collected (which must not refer to
     * the Element itself).
     */
    static final class Held implements Runnable {
        static final int HELD = 0, BUSY = 1, PUSHED = 2, RELEASED = 3;
        private static final AtomicIntegerFieldUpdater<Held> STATE =
                AtomicIntegerFieldUpdater.newUpdater(Held.class, "state");

        final ShoalQueueSet set;
        final long[] words;
        volatile int state;
        /** The revocable views of the bytes (FFM), made on first use; guarded by this. */
        NativeApi.Region region;

        Held(ShoalQueueSet set, long[] words) {
            this.set = set;
            this.words = words;
        }

        /**
         * Takes the element for a push or a release: only one caller ever succeeds, so an
         * element is never pushed twice (the library does not track which thread holds what).
         */
        boolean acquire() {
            return STATE.compareAndSet(this, HELD, BUSY);
        }

        /** Makes the views taken so far unusable, where the backend can. */
        void revoke() {
            synchronized (this) {
                if (region != null && region.revocable()) {
                    region.revoke();
                    region = null;
                }
            }
        }

        ClosedException notHeld() {
            int s = state;
            String why = s == PUSHED ? "it was pushed"
                    : s == RELEASED ? "it was given back"
                    : "another thread is pushing or giving it back";
            return new ClosedException(0, "element " + words[NativeApi.E_INDEX] + " of queue set " + set.name
                    + " is no longer held by this process: " + why);
        }

        /** Gives the element back (its Element became unreachable, or the set closes). */
        @Override
        public void run() {
            if (!acquire()) {
                return;
            }
            try {
                revoke();
                set.release(this);
                state = RELEASED;
                set.held.remove(this);
            } catch (RuntimeException e) {
                // Its bytes are in use by another thread right now, or the library refused:
                // it stays held (until the process ends) rather than be given away under a user.
                state = HELD;
            }
        }
    }

    /** @return the set's name */
    public String name() {
        return name;
    }

    /** @return whether {@link #close()} was called */
    public boolean isClosed() {
        return closed;
    }

    private void live() {
        if (closed) {
            throw new ClosedException(0, "the queue set " + name + " is closed");
        }
        if (store.closed) {
            throw new ClosedException(0, "the store " + store.path() + " is closed");
        }
    }

    /**
     * The number of the queue {@code name}, which every other call takes.
     *
     * @param name a queue's name
     * @return its number
     * @throws NotFoundException if the set has no such queue
     */
    public int queue(String name) {
        ShoalStore.checkText(name, "queue name");
        live();
        try {
            return api.queueIndex(h, name);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    private Element adopt(long[] words, int off) {
        long[] w = new long[NativeApi.E_WORDS];
        System.arraycopy(words, off, w, 0, NativeApi.E_WORDS);
        Held hd = new Held(this, w);
        held.add(hd);
        Element e = new Element(this, hd);
        if (closed) {
            // Pulled while another thread closed the set: do not leave it held.
            e.close();
            throw new ClosedException(0, "the queue set " + name + " is closed");
        }
        return e;
    }

    /**
     * Takes the element at the head of queue {@code q}, without waiting.
     *
     * @param q a queue number
     * @return the element, now held by this process, or null if the queue is empty
     * @throws InvalidArgumentException if there is no queue {@code q}
     */
    public Element pull(int q) {
        live();
        long[] w = new long[NativeApi.E_WORDS];
        try {
            return api.queuePull(h, q, 0, w) ? adopt(w, 0) : null;
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Takes the element at the head of queue {@code q}, waiting up to {@code timeout} for
     * a push from any process if it is empty (a short spin, then a sleep that a push
     * wakes; elements coming back from a dead holder are found within about 10 ms).
     *
     * @param q a queue number
     * @param timeout how long to wait at most; zero: not at all (rounded up to whole milliseconds)
     * @return the element, or null if none came in time
     * @throws InvalidArgumentException if there is no queue {@code q}
     * @throws IllegalArgumentException if {@code timeout} is negative
     */
    public Element pull(int q, Duration timeout) {
        long ms = millis(timeout);
        live();
        long[] w = new long[NativeApi.E_WORDS];
        try {
            return api.queuePull(h, q, ms, w) ? adopt(w, 0) : null;
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** A timeout in whole milliseconds, rounded up, saturating. */
    private static long millis(Duration timeout) {
        Objects.requireNonNull(timeout, "timeout");
        if (timeout.isNegative()) {
            throw new IllegalArgumentException("negative timeout " + timeout);
        }
        try {
            return Math.addExact(timeout.toMillis(), timeout.toNanosPart() % 1_000_000 == 0 ? 0 : 1);
        } catch (ArithmeticException e) {
            return Long.MAX_VALUE;
        }
    }

    /**
     * Takes the element at the head of the first non-empty queue among {@code queues}
     * (looked at in that order), waiting up to {@code timeout} for a push to any of them
     * if all are empty. {@link Element#fromQueue()} says which queue it came from.
     *
     * @param timeout how long to wait at most; zero: not at all (rounded up to whole milliseconds)
     * @param queues queue numbers, at least one
     * @return the element, now held by this process, or null if none came in time
     * @throws InvalidArgumentException if a queue does not exist or none is given
     * @throws IllegalArgumentException if {@code timeout} is negative
     */
    public Element pullAny(Duration timeout, int... queues) {
        long ms = millis(timeout);
        Objects.requireNonNull(queues, "queues");
        live();
        long[] w = new long[NativeApi.E_WORDS];
        try {
            return api.queuePullAny(h, queues, ms, w) ? adopt(w, 0) : null;
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Takes up to {@code max} elements from the head of queue {@code q} in one step,
     * without waiting.
     *
     * @param q a queue number
     * @param max at most this many
     * @return the elements, in queue order; empty if the queue is
     * @throws IllegalArgumentException if {@code max} is negative
     */
    public List<Element> pullMany(int q, int max) {
        if (max < 0) {
            throw new IllegalArgumentException("negative max " + max);
        }
        live();
        if (max == 0) {
            return new ArrayList<>();
        }
        try {
            // Room for what the queue holds now, not for max: max may be huge. A queue that
            // grows meanwhile gives fewer than it could, which "up to" allows.
            int n = (int) Math.max(1, Math.min(max, api.queueLen(h, q)));
            long[] w = new long[n * NativeApi.E_WORDS];
            int got = api.queuePullMany(h, q, n, w);
            List<Element> r = new ArrayList<>(got);
            for (int i = 0; i < got; i++) {
                try {
                    r.add(adopt(w, i * NativeApi.E_WORDS));
                } catch (ClosedException e) {
                    // The set closed meanwhile: give back the rest too.
                    for (int j = i + 1; j < got; j++) {
                        release(new Held(this, java.util.Arrays.copyOfRange(w, j * NativeApi.E_WORDS,
                                (j + 1) * NativeApi.E_WORDS)));
                    }
                    r.forEach(Element::close);
                    throw e;
                }
            }
            return r;
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    private Held own(Element e) {
        Objects.requireNonNull(e, "element");
        if (e.set != this) {
            throw new InvalidArgumentException(8, e + " belongs to another queue set handle than " + name);
        }
        return e.held;
    }

    /**
     * Puts a held element at the tail of queue {@code q}: it is no longer this process's,
     * and the element object is spent (its buffers are revoked on Java 22+).
     *
     * @param q a queue number
     * @param e an element this handle pulled and still holds
     * @throws QueueFullException if the queue is at its depth limit: the element stays held
     * @throws ClosedException if the element was already pushed or given back
     * @throws InvalidArgumentException if there is no queue {@code q}, or the element was
     *     pulled through another handle
     * @throws IllegalStateException (Java 22+) if another thread is using the element's
     *     bytes right now: it stays held
     */
    public void push(int q, Element e) {
        Held hd = own(e);
        live();
        if (!hd.acquire()) {
            throw hd.notHeld();
        }
        try {
            hd.revoke();
            api.queuePush(h, q, hd.words);
        } catch (RuntimeException x) {
            hd.state = Held.HELD;
            throw x;
        } finally {
            Reference.reachabilityFence(this);
        }
        e.settle(Held.PUSHED);
    }

    /**
     * Puts held elements at the tail of queue {@code q}, in order, in one step: all of
     * them or, if an exception is thrown, none (they all stay held).
     *
     * @param q a queue number
     * @param elements elements this handle pulled and still holds, each once
     * @throws QueueFullException if they do not all fit under the queue's depth limit
     * @throws ClosedException if one was already pushed or given back
     * @throws InvalidArgumentException if one is given twice, or was pulled through
     *     another handle, or there is no queue {@code q}
     */
    public void pushMany(int q, List<Element> elements) {
        Objects.requireNonNull(elements, "elements");
        List<Held> hs = new ArrayList<>(elements.size());
        for (Element e : elements) {
            hs.add(own(e));
        }
        live();
        if (hs.isEmpty()) {
            return;
        }
        Set<Held> taken = Collections.newSetFromMap(new IdentityHashMap<>());
        try {
            for (Held hd : hs) {
                if (taken.contains(hd)) {
                    throw new InvalidArgumentException(8, "element " + hd.words[NativeApi.E_INDEX] + " given twice");
                }
                if (!hd.acquire()) {
                    throw hd.notHeld();
                }
                taken.add(hd);
            }
            long[] w = new long[hs.size() * NativeApi.E_WORDS];
            for (int i = 0; i < hs.size(); i++) {
                Held hd = hs.get(i);
                hd.revoke();
                System.arraycopy(hd.words, 0, w, i * NativeApi.E_WORDS, NativeApi.E_WORDS);
            }
            api.queuePushMany(h, q, w, hs.size());
        } catch (RuntimeException x) {
            for (Held hd : taken) {
                hd.state = Held.HELD;
            }
            throw x;
        } finally {
            Reference.reachabilityFence(this);
        }
        for (Element e : elements) {
            e.settle(Held.PUSHED);
        }
    }

    /** Gives an acquired element back through the library. */
    void release(Held hd) {
        try {
            api.queueRelease(h, hd.words);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Moves up to {@code max} elements from the head of queue {@code from} to the tail of
     * queue {@code to} in one step, within {@code to}'s depth limit, without holding them.
     *
     * @param from a queue number
     * @param to another queue number
     * @param max at most this many
     * @return how many moved
     * @throws InvalidArgumentException if a queue does not exist or {@code from == to}
     */
    public long move(int from, int to, long max) {
        if (max < 0) {
            throw new IllegalArgumentException("negative max " + max);
        }
        live();
        try {
            return api.queueMove(h, from, to, max);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * @param q a queue number
     * @return how many elements are in the queue now
     */
    public long len(int q) {
        live();
        try {
            return api.queueLen(h, q);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** @return the size of every element of the set, in bytes */
    public int elementSize() {
        return (int) info()[0];
    }

    /** @return how many elements the set has */
    public long elements() {
        return info()[1];
    }

    private long[] info() {
        live();
        try {
            return api.queueInfo(h);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * The set's queues, by number: {@code queueNames().get(q)} is queue {@code q}'s name
     * ({@link #queue(String)} is the other way).
     *
     * @return the names, in the order of creation
     */
    public List<String> queueNames() {
        int n = (int) info()[2];
        List<String> r = new ArrayList<>(n);
        try {
            for (int q = 0; q < n; q++) {
                r.add(api.queueName(h, q));
            }
        } finally {
            Reference.reachabilityFence(this);
        }
        return Collections.unmodifiableList(r);
    }

    /**
     * Figures of one queue.
     *
     * @param q a queue number
     * @return its name, length, limit and counters now
     * @throws InvalidArgumentException if there is no queue {@code q}
     */
    public QueueStats stats(int q) {
        live();
        try {
            long[] v = api.queueStats(h, q);
            return new QueueStats(api.queueName(h, q), v[0], v[1], v[2], v[3], v[4]);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * The processes that hold elements of the set now (of every language), with how many
     * each: a process that dies holding some shows here until its elements go back.
     *
     * @return one entry per holding process
     */
    public List<QueueHolder> holders() {
        live();
        long[] v;
        try {
            v = api.queueHolders(h);
        } finally {
            Reference.reachabilityFence(this);
        }
        List<QueueHolder> r = new ArrayList<>(v.length / 2);
        for (int i = 0; i + 1 < v.length; i += 2) {
            r.add(new QueueHolder((int) v[i], v[i + 1]));
        }
        return r;
    }

    /**
     * Hands back now the elements of every process that died holding some (pulls do it
     * on their own when they find a queue empty).
     *
     * @return how many elements went back
     */
    public long reclaim() {
        live();
        try {
            return api.queueReclaim(h);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Gives back every element still held through this handle (except one whose bytes
     * another thread is using at this moment on Java 22+, which stays held), and refuses
     * further calls; idempotent. The set and its elements stay in the file.
     */
    @Override
    public void close() {
        closed = true;
        for (Held hd : held) {
            hd.run();
        }
    }

    @Override
    public String toString() {
        return "ShoalQueueSet(" + name + " in " + store.path() + (closed ? ", closed)" : ")");
    }
}
