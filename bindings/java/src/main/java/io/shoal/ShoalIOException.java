package io.shoal;

/**
 * An I/O error of the operating system while opening, growing or flushing the store.
 */
public class ShoalIOException extends ShoalException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it
     * @param message what went wrong, as the library said it
     */
    public ShoalIOException(int status, String message) {
        super(status, message);
    }
}
