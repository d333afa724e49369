package io.shoal;

/**
 * How a map's keys or values are encoded, recorded in the file when the map is created
 * (FORMAT.md, "Key and value types"), so that every process, in every language, picks the
 * same codec without being told. A map created with the standard {@link Codecs} records
 * theirs ({@link Codec#dataType()}); {@link ShoalStore#map(String)} opens a map with the
 * codecs its recorded types name; a codec of another type is refused with
 * {@link InvalidArgumentException}, except {@link #BYTES}, which opens any map. Immutable;
 * equal when code and tag are.
 */
public final class DataType {
    /** Opaque bytes, as they are (code 1). */
    public static final DataType BYTES = new DataType(1, 0);
    /** UTF-8 text, no terminator (code 2). */
    public static final DataType UTF8 = new DataType(2, 0);
    /** A signed integer: 8 bytes, two's complement, little-endian (code 3). */
    public static final DataType I64 = new DataType(3, 0);
    /** An unsigned integer: 8 bytes, little-endian (code 4). */
    public static final DataType U64 = new DataType(4, 0);
    /** A binary64 floating-point number: 8 bytes, little-endian (code 5). */
    public static final DataType F64 = new DataType(5, 0);
    /** JSON text in UTF-8; as keys, canonical: compact, object keys sorted (code 6). */
    public static final DataType JSON = new DataType(6, 0);

    private static final int USER = 7;

    private final int code;
    private final long tag;

    private DataType(int code, long tag) {
        this.code = code;
        this.tag = tag;
    }

    /**
     * An encoding of the application's own, named by a tag that means something to the
     * programs sharing the map (code 7). The Python binding records its pickles as
     * {@code user(0x6c6b6369703a7970L)} ("py:pickl" read little-endian).
     *
     * @param tag the application's tag
     * @return the type
     */
    public static DataType user(long tag) {
        return new DataType(USER, tag);
    }

    /**
     * The type of a code and tag read from a map header: null for 0 (none recorded); a
     * code this library does not know (a newer one wrote it) is kept, and reads as bytes.
     */
    static DataType of(long code, long tag) {
        switch ((int) code) {
            case 0: return null;
            case 1: return BYTES;
            case 2: return UTF8;
            case 3: return I64;
            case 4: return U64;
            case 5: return F64;
            case 6: return JSON;
            case USER: return user(tag);
            default: return new DataType((int) code, 0);
        }
    }

    /** @return the code in the map header (1 to 7; higher ones are a newer library's) */
    public int code() {
        return code;
    }

    /** @return the tag of a {@link #user} type, 0 for the others */
    public long tag() {
        return tag;
    }

    /** @return whether this library knows the code (false: a newer library's type, read as bytes) */
    public boolean isKnown() {
        return code >= 1 && code <= USER;
    }

    /**
     * The name every binding and the {@code shoal} tool give the type: {@code bytes},
     * {@code utf8}, {@code i64}, {@code u64}, {@code f64}, {@code json},
     * {@code user:0xTAG}, {@code unknown:CODE}.
     *
     * @return the name
     */
    public String name() {
        switch (code) {
            case 1: return "bytes";
            case 2: return "utf8";
            case 3: return "i64";
            case 4: return "u64";
            case 5: return "f64";
            case 6: return "json";
            case USER: return "user:0x" + Long.toHexString(tag);
            default: return "unknown:" + code;
        }
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof DataType && ((DataType) o).code == code && ((DataType) o).tag == tag;
    }

    @Override
    public int hashCode() {
        return code * 31 + Long.hashCode(tag);
    }

    @Override
    public String toString() {
        return name();
    }
}
