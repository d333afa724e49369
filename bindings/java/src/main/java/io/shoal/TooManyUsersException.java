package io.shoal;

/**
 * More processes or threads use the store at once than it has slots for ({@link Options#maxProcesses(int)}, {@link Options#maxThreads(int)}).
 */
public class TooManyUsersException extends ShoalException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it
     * @param message what went wrong, as the library said it
     */
    public TooManyUsersException(int status, String message) {
        super(status, message);
    }
}
