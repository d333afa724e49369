package io.shoal;

import java.lang.foreign.MemorySegment;

/**
 * An element of a queue set that this process holds ({@link ShoalQueueSet#pull}): a
 * fixed-size block of the store file, its bytes read and written in place through
 * {@link #buffer()} or {@link #segment()} with no copy, until this process pushes it on
 * ({@link ShoalQueueSet#push}) or gives it back ({@link #close()}). Then every call on it
 * but {@code close()} throws {@link ClosedException}, and every buffer and segment taken
 * from it throws {@link IllegalStateException} (with the FFM backend, the default on Java
 * 22+). Thread-safe; use it in a
 * {@code try}-with-resources block:
 *
 * <pre>{@code
 * try (Element e = set.pull(free, Duration.ofSeconds(1))) {
 *     MemorySegment.copy(frame, 0, e.segment(), 0, frame.byteSize());
 *     set.push(ready, e);          // close() then does nothing
 * }                                // without the push: back to free
 * }</pre>
 *
 * An element that becomes unreachable while held goes back where it came from when the
 * garbage collector finds it. This is the Java 22+ class (the jar's
 * {@code META-INF/versions/22}); on Java 17-21 it has no {@code segment()}.
 */
public final class Element extends ElementBase {
    Element(ShoalQueueSet set, ShoalQueueSet.Held held) {
        super(set, held);
    }

    /**
     * A memory segment over the element's bytes in place: {@link #buffer()}'s bytes, with
     * the same lifetime (unusable once the element is pushed or given back, when the
     * FFM backend runs; see {@link #buffer()} for the JNI one).
     *
     * @return the segment
     * @throws ClosedException if the element is no longer held
     */
    public MemorySegment segment() {
        return MemorySegment.ofBuffer(buffer());
    }
}
