package io.shoal;

/**
 * A lock held by a live but stuck process (stopped with SIGSTOP, in a debugger) was not released within the lock timeout ({@link Options#lockTimeout(java.time.Duration)}). Locks of dead processes never cause it: they are recovered within milliseconds.
 */
public class ShoalTimeoutException extends ShoalException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it
     * @param message what went wrong, as the library said it
     */
    public ShoalTimeoutException(int status, String message) {
        super(status, message);
    }
}
