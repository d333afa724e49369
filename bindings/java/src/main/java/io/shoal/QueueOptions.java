package io.shoal;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * How {@link ShoalStore#queueSet(String, QueueOptions)} creates a queue set: the size and
 * number of its elements, its queues with their depth limits, the queue elements start
 * in, and where a dead holder's elements go. A builder whose setters return it. The
 * options apply only when the set is created; an existing set keeps its own.
 *
 * <pre>{@code
 * QueueOptions.of(4096, 64).queue("ready", 16).queue("done").redeliver(true)
 * }</pre>
 *
 * <p>Queues are numbered in order: {@code free} (or the initial queue) 0, then the queues
 * added; {@link ShoalQueueSet#queue(String)} gives the number of a name.
 */
public final class QueueOptions {
    final long elementSize;
    final long elements;
    final List<String> queues = new ArrayList<>();
    final List<Long> limits = new ArrayList<>();
    String initial;
    boolean redeliver;

    private QueueOptions(long elementSize, long elements) {
        this.elementSize = elementSize;
        this.elements = elements;
    }

    /**
     * Options of a set of {@code elements} elements of {@code elementSize} bytes each,
     * zeroed, all in the queue {@code free} at first (see {@link #initial}).
     *
     * @param elementSize bytes per element, 1 to 2^30
     * @param elements elements in the set, 1 to 2^32 - 1 (the file holds them all)
     * @return new options
     * @throws IllegalArgumentException if a value is out of range
     */
    public static QueueOptions of(int elementSize, long elements) {
        if (elementSize < 1 || elementSize > 1 << 30) {
            throw new IllegalArgumentException("elementSize must be 1 to 2^30, not " + elementSize);
        }
        if (elements < 1 || elements > 0xffff_ffffL) {
            throw new IllegalArgumentException("elements must be 1 to 2^32 - 1, not " + elements);
        }
        return new QueueOptions(elementSize, elements);
    }

    /**
     * Adds a queue with no depth limit.
     *
     * @param name its name, 1 to 120 bytes of UTF-8
     * @return this
     */
    public QueueOptions queue(String name) {
        return queue(name, 0);
    }

    /**
     * Adds a queue of at most {@code depthLimit} elements: a push past it throws
     * {@link QueueFullException}. Elements that come back from a dead holder, and
     * {@link Element#close()}, go past the limit (an element always has somewhere to go).
     *
     * @param name its name, 1 to 120 bytes of UTF-8
     * @param depthLimit its limit; 0 for none
     * @return this
     * @throws IllegalArgumentException if {@code depthLimit} is negative
     */
    public QueueOptions queue(String name, long depthLimit) {
        ShoalStore.checkText(name, "queue name");
        if (depthLimit < 0) {
            throw new IllegalArgumentException("depthLimit must be 0 (none) or positive, not " + depthLimit);
        }
        queues.add(name);
        limits.add(depthLimit);
        return this;
    }

    /**
     * Names the queue every element starts in, in place of {@code free}; it is also where
     * a dead holder's elements go unless {@link #redeliver} is set. A name not added with
     * {@link #queue} becomes the first queue; the set then has no {@code free} queue unless
     * it is added.
     *
     * @param name the queue
     * @return this
     */
    public QueueOptions initial(String name) {
        ShoalStore.checkText(name, "queue name");
        this.initial = name;
        return this;
    }

    /**
     * @param redeliver true: the elements of a process that dies holding them go back to
     *     the queue each was pulled from, marked {@link Element#redelivered()}, so that a
     *     consumer can tell work that may have been half done; false (the default): to the
     *     initial queue
     * @return this
     */
    public QueueOptions redeliver(boolean redeliver) {
        this.redeliver = redeliver;
        return this;
    }

    @Override
    public String toString() {
        return "QueueOptions(" + elementSize + " x " + elements + ", queues " + queues + ", limits " + limits
                + (initial == null ? "" : ", initial " + Objects.toString(initial)) + (redeliver ? ", redeliver" : "")
                + ")";
    }
}
