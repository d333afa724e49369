package io.shoal;

/**
 * The file is not a consistent Shoal store; the message says what and where.
 */
public class CorruptStoreException extends ShoalException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it
     * @param message what went wrong, as the library said it
     */
    public CorruptStoreException(int status, String message) {
        super(status, message);
    }
}
