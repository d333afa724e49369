package io.shoal;

/**
 * A UID whose key was removed: it names nothing any more, even once its table entry is reused by a later key.
 */
public class StaleUidException extends ShoalException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it
     * @param message what went wrong, as the library said it
     */
    public StaleUidException(int status, String message) {
        super(status, message);
    }
}
