package io.shoal;

/**
 * The base of every error Shoal raises: unchecked, as the collections it implements expect.
 * {@link #status()} is the C API's status code ({@code shoal_status}), the same number every
 * language's binding reports; the message is the library's detail message.
 */
public class ShoalException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int status;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it (0 when none applies)
     * @param message what went wrong
     */
    public ShoalException(int status, String message) {
        super(message);
        this.status = status;
    }

    /**
     * Creates the exception with a cause.
     *
     * @param status the C API status code behind it (0 when none applies)
     * @param message what went wrong
     * @param cause the underlying error
     */
    public ShoalException(int status, String message, Throwable cause) {
        super(message, cause);
        this.status = status;
    }

    /**
     * The C API status code ({@code SHOAL_FULL} = 3, ...), or 0 for an error raised by the
     * binding itself (a closed store, a codec failure).
     *
     * @return the status code
     */
    public int status() {
        return status;
    }
}
