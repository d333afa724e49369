package io.shoal;

/**
 * The store (or the map or cell opened from it) was closed.
 */
public class ClosedException extends ShoalException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it
     * @param message what went wrong, as the library said it
     */
    public ClosedException(int status, String message) {
        super(status, message);
    }
}
