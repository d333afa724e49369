package io.shoal;

import java.util.Objects;
import java.util.function.BinaryOperator;
import java.util.function.UnaryOperator;

/**
 * One persisted value shared by every thread and process, in the style of
 * {@link java.util.concurrent.atomic.AtomicReference}: the single entry, under the empty
 * key, of the map named after the cell (so any language reads it as that map's entry
 * {@code b""}). Updates with a function read the value, apply the function with no lock
 * held and install the result with a compare-and-swap, retrying on conflict: a function
 * that throws, or a process killed while it runs, leaves nothing locked.
 *
 * @param <T> the value type
 */
public final class ShoalCell<T> {
    private static final byte[] KEY = new byte[0];

    private final ShoalMap<byte[], T> map;
    private final Codec<T> codec;
    private final T initial;
    private final byte[] initialBytes;

    ShoalCell(ShoalMap<byte[], T> map, Codec<T> codec, T initial) {
        this.map = map;
        this.codec = codec;
        this.initial = Objects.requireNonNull(initial, "initial");
        this.initialBytes = codec.encode(initial);
        map.putIfAbsent(KEY, initial);
    }

    /** @return the cell's name (its map's) */
    public String name() {
        return map.name();
    }

    /**
     * The current value (the initial one if another process removed the entry).
     *
     * @return the value
     */
    public T get() {
        T v = map.get(KEY);
        return v == null ? initial : v;
    }

    /** @param value the new value */
    public void set(T value) {
        map.set(KEY, value);
    }

    /**
     * @param value the new value
     * @return the previous one
     */
    public T getAndSet(T value) {
        T old = map.put(KEY, value);
        return old == null ? initial : old;
    }

    /**
     * Sets the value if it is {@code expected} (compared by encoded bytes).
     *
     * @param expected the value the cell must hold
     * @param update the new value
     * @return whether it did
     */
    public boolean compareAndSet(T expected, T update) {
        Objects.requireNonNull(expected, "expected");
        byte[] e = codec.encode(expected);
        byte[] u = codec.encode(Objects.requireNonNull(update, "update"));
        if (map.replace(KEY, expected, update)) {
            return true;
        }
        // An absent entry holds the initial value: install the update over it.
        return java.util.Arrays.equals(e, initialBytes) && map.putIfAbsent(KEY, codec.decode(u)) == null;
    }

    /**
     * Applies {@code fn} atomically (optimistic retry: it may run several times).
     *
     * @param fn from the current value to the new one
     * @return the previous value
     */
    public T getAndUpdate(UnaryOperator<T> fn) {
        for (;;) {
            T cur = get();
            T next = Objects.requireNonNull(fn.apply(cur), "the function returned null");
            if (compareAndSet(cur, next)) {
                return cur;
            }
            Thread.onSpinWait();
        }
    }

    /**
     * Applies {@code fn} atomically (optimistic retry: it may run several times).
     *
     * @param fn from the current value to the new one
     * @return the new value
     */
    public T updateAndGet(UnaryOperator<T> fn) {
        for (;;) {
            T cur = get();
            T next = Objects.requireNonNull(fn.apply(cur), "the function returned null");
            if (compareAndSet(cur, next)) {
                return next;
            }
            Thread.onSpinWait();
        }
    }

    /**
     * Combines the value with {@code x} atomically.
     *
     * @param x the other operand
     * @param fn the combination
     * @return the new value
     */
    public T accumulateAndGet(T x, BinaryOperator<T> fn) {
        return updateAndGet(cur -> fn.apply(cur, x));
    }

    /**
     * Adds {@code delta} in the engine, in one atomic call, to a cell in the
     * {@link Codecs#LONG} layout.
     *
     * @param delta what to add
     * @return the new value
     * @throws InvalidArgumentException if the stored value is not 8 bytes long
     */
    public long addAndGet(long delta) {
        return map.addAndGet(KEY, delta);
    }

    @Override
    public String toString() {
        return "ShoalCell(" + map.name() + " = " + get() + ")";
    }
}
