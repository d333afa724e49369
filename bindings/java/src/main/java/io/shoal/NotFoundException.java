package io.shoal;

/**
 * The store file or the map does not exist (and was not to be created).
 */
public class NotFoundException extends ShoalException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it
     * @param message what went wrong, as the library said it
     */
    public NotFoundException(int status, String message) {
        super(status, message);
    }
}
