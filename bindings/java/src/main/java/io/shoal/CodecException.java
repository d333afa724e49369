package io.shoal;

/**
 * A codec could not encode a key or value, or decode stored bytes (a map read with other codecs than it was written with).
 */
public class CodecException extends ShoalException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param status the C API status code behind it
     * @param message what went wrong, as the library said it
     */
    public CodecException(int status, String message) {
        super(status, message);
    }
}
