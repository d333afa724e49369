package io.shoal;

/**
 * The store reached its maximum size or its maximum number of maps: raise {@link Options#maxSize(long)} or {@link Options#maxMaps(int)} when creating it, or remove entries.
 */
public class StoreFullException extends ShoalException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it
     * @param message what went wrong, as the library said it
     */
    public StoreFullException(int status, String message) {
        super(status, message);
    }
}
