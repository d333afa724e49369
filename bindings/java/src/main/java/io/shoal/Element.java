package io.shoal;

/**
 * An element of a queue set that this process holds ({@link ShoalQueueSet#pull}): a
 * fixed-size block of the store file, its bytes read and written in place through
 * {@link #buffer()} with no copy, until this process pushes it on
 * ({@link ShoalQueueSet#push}) or gives it back ({@link #close()}). Then every call on it
 * but {@code close()} throws {@link ClosedException}. Thread-safe; use it in a
 * {@code try}-with-resources block:
 *
 * <pre>{@code
 * try (Element e = set.pull(free, Duration.ofSeconds(1))) {
 *     e.buffer().put(frame);
 *     set.push(ready, e);          // close() then does nothing
 * }                                // without the push: back to free
 * }</pre>
 *
 * An element that becomes unreachable while held goes back where it came from when the
 * garbage collector finds it. On Java 22+ the jar's version of this class also has
 * {@code segment()}, a {@code MemorySegment} over the same bytes.
 */
public final class Element extends ElementBase {
    Element(ShoalQueueSet set, ShoalQueueSet.Held held) {
        super(set, held);
    }
}
