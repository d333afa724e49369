package io.shoal.internal;

import io.shoal.AlreadyExistsException;
import io.shoal.CorruptStoreException;
import io.shoal.InvalidArgumentException;
import io.shoal.NoSpaceException;
import io.shoal.NotAStoreException;
import io.shoal.NotFoundException;
import io.shoal.PermissionDeniedException;
import io.shoal.QueueFullException;
import io.shoal.ReadOnlyException;
import io.shoal.ShoalException;
import io.shoal.ShoalIOException;
import io.shoal.ShoalTimeoutException;
import io.shoal.StaleUidException;
import io.shoal.StoreFullException;
import io.shoal.TooManyUsersException;
import io.shoal.VersionMismatchException;

/**
 * The C API's status codes ({@code enum shoal_status} in shoal.h) and the exception each
 * failure becomes. Internal: not part of the API.
 */
public final class Status {
    private Status() {}

    /** {@code SHOAL_OK}. */
    public static final int OK = 0;
    /** {@code SHOAL_NOT_FOUND}. */
    public static final int NOT_FOUND = 1;
    /** {@code SHOAL_EXISTS}. */
    public static final int EXISTS = 2;
    /** {@code SHOAL_FULL}. */
    public static final int FULL = 3;
    /** {@code SHOAL_NO_SPACE}. */
    public static final int NO_SPACE = 4;
    /** {@code SHOAL_CORRUPT}. */
    public static final int CORRUPT = 5;
    /** {@code SHOAL_VERSION}. */
    public static final int VERSION = 6;
    /** {@code SHOAL_PERMISSION}. */
    public static final int PERMISSION = 7;
    /** {@code SHOAL_INVALID}. */
    public static final int INVALID = 8;
    /** {@code SHOAL_TIMEOUT}. */
    public static final int TIMEOUT = 9;
    /** {@code SHOAL_TOO_MANY}. */
    public static final int TOO_MANY = 10;
    /** {@code SHOAL_IO}. */
    public static final int IO = 11;
    /** {@code SHOAL_BUFFER_TOO_SMALL}. */
    public static final int BUFFER_TOO_SMALL = 12;
    /** {@code SHOAL_NULL_POINTER}. */
    public static final int NULL_POINTER = 13;
    /** {@code SHOAL_PANIC}. */
    public static final int PANIC = 14;
    /** {@code SHOAL_NOT_A_STORE}. */
    public static final int NOT_A_STORE = 15;
    /** {@code SHOAL_DONE}. */
    public static final int DONE = 16;
    /** {@code SHOAL_ERROR}. */
    public static final int ERROR = 17;
    /** {@code SHOAL_MISMATCH}. */
    public static final int MISMATCH = 18;
    /** {@code SHOAL_STALE_UID}. */
    public static final int STALE_UID = 19;
    /** {@code SHOAL_READ_ONLY}. */
    public static final int READ_ONLY = 20;
    /** {@code SHOAL_EMPTY}. */
    public static final int EMPTY = 21;
    /** {@code SHOAL_QUEUE_FULL}. */
    public static final int QUEUE_FULL = 22;

    /**
     * {@link #exception} with the message as UTF-8 bytes: what the JNI shim calls from C
     * (JNI's own string functions take modified UTF-8, not UTF-8).
     *
     * @param status the status the call returned
     * @param message the message's UTF-8 bytes
     * @return the exception to throw
     */
    public static ShoalException exceptionUtf8(int status, byte[] message) {
        return exception(status, new String(message, java.nio.charset.StandardCharsets.UTF_8));
    }

    /**
     * The exception for a failed call, from both backends.
     *
     * @param status the status the call returned
     * @param message {@code shoal_last_error_message()} of the failing thread
     * @return the exception to throw
     */
    public static ShoalException exception(int status, String message) {
        String m = message == null || message.isEmpty() ? "status " + status : message;
        switch (status) {
            case NOT_FOUND: return new NotFoundException(status, m);
            case EXISTS: return new AlreadyExistsException(status, m);
            case FULL: return new StoreFullException(status, m);
            case NO_SPACE: return new NoSpaceException(status, m);
            case CORRUPT: return new CorruptStoreException(status, m);
            case NOT_A_STORE: return new NotAStoreException(status, m);
            case VERSION: return new VersionMismatchException(status, m);
            case PERMISSION: return new PermissionDeniedException(status, m);
            case INVALID:
            case NULL_POINTER:
            case BUFFER_TOO_SMALL:
                return new InvalidArgumentException(status, m);
            case TIMEOUT: return new ShoalTimeoutException(status, m);
            case TOO_MANY: return new TooManyUsersException(status, m);
            case IO: return new ShoalIOException(status, m);
            case STALE_UID: return new StaleUidException(status, m);
            case READ_ONLY: return new ReadOnlyException(status, m);
            case QUEUE_FULL: return new QueueFullException(status, m);
            default: return new ShoalException(status, m);
        }
    }
}
