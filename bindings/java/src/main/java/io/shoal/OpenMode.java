package io.shoal;

/** How {@link Shoal#open} treats an existing or missing file. */
public enum OpenMode {
    /** Open the store, creating it if it does not exist (the default). */
    OPEN_OR_CREATE,
    /** Open an existing store; {@link NotFoundException} if there is none. */
    OPEN_EXISTING,
    /** Create a new store; {@link AlreadyExistsException} if the file exists. */
    CREATE_NEW,
    /** Open an existing store for reading only; writes raise {@link ReadOnlyException}. */
    READ_ONLY
}
