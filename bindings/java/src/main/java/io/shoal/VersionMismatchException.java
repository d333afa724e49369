package io.shoal;

/**
 * The file was written by a newer format version than this library reads, or needs an upgrade that other processes holding it open prevent.
 */
public class VersionMismatchException extends ShoalException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it
     * @param message what went wrong, as the library said it
     */
    public VersionMismatchException(int status, String message) {
        super(status, message);
    }
}
