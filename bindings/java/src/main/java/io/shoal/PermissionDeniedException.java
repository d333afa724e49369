package io.shoal;

/**
 * The operating system refused access to the store file.
 */
public class PermissionDeniedException extends ShoalException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it
     * @param message what went wrong, as the library said it
     */
    public PermissionDeniedException(int status, String message) {
        super(status, message);
    }
}
