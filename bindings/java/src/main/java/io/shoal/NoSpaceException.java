package io.shoal;

/**
 * The filesystem holding the store has no room left (for example a full {@code /dev/shm}).
 */
public class NoSpaceException extends StoreFullException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it
     * @param message what went wrong, as the library said it
     */
    public NoSpaceException(int status, String message) {
        super(status, message);
    }
}
