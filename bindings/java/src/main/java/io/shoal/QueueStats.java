package io.shoal;

/**
 * Figures of one queue of a queue set ({@link ShoalQueueSet#stats(int)}).
 *
 * @param name the queue's name
 * @param len elements in it now
 * @param limit its depth limit (0: none)
 * @param pushes elements pushed into it so far (moved in and handed back included)
 * @param pulls elements pulled from it so far (moved out included)
 * @param waits times a pull slept waiting for it
 */
public record QueueStats(String name, long len, long limit, long pushes, long pulls, long waits) {}
