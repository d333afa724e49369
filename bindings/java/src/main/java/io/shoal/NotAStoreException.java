package io.shoal;

/**
 * The file is not a Shoal store at all (its first bytes are not Shoal's magic).
 */
public class NotAStoreException extends CorruptStoreException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it
     * @param message what went wrong, as the library said it
     */
    public NotAStoreException(int status, String message) {
        super(status, message);
    }
}
