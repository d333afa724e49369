package io.shoal;

/**
 * The store was opened with {@link OpenMode#READ_ONLY} and the call needs to write.
 */
public class ReadOnlyException extends ShoalException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it
     * @param message what went wrong, as the library said it
     */
    public ReadOnlyException(int status, String message) {
        super(status, message);
    }
}
