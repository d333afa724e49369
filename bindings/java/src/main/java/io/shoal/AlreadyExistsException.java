package io.shoal;

/**
 * The store file exists where {@link OpenMode#CREATE_NEW} wanted to create it.
 */
public class AlreadyExistsException extends ShoalException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it
     * @param message what went wrong, as the library said it
     */
    public AlreadyExistsException(int status, String message) {
        super(status, message);
    }
}
