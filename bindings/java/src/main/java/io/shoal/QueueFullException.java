package io.shoal;

/**
 * A push would take a queue past its depth limit ({@link QueueOptions#queue(String, long)}):
 * nothing was pushed, and the elements stay held by this process.
 */
public class QueueFullException extends ShoalException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it
     * @param message what went wrong, as the library said it
     */
    public QueueFullException(int status, String message) {
        super(status, message);
    }
}
