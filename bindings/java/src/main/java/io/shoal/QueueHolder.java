package io.shoal;

/**
 * A process that holds elements of a queue set ({@link ShoalQueueSet#holders()}).
 *
 * @param pid the process's id
 * @param elements how many elements it holds
 */
public record QueueHolder(int pid, long elements) {}
