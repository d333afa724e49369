package io.shoal;

/**
 * An argument is out of range: a key or value too large, a bad map name, a fixed-size key or value of the wrong length, a map of the other kind, a by-UID call on a map without UIDs.
 */
public class InvalidArgumentException extends ShoalException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it
     * @param message what went wrong, as the library said it
     */
    public InvalidArgumentException(int status, String message) {
        super(status, message);
    }
}
