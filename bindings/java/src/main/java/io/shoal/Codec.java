package io.shoal;

/**
 * Turns keys or values of type {@code T} into the bytes a map stores, and back. Keys
 * compare by their encoded bytes, and so do the expected values of
 * {@link ShoalMap#replace(Object, Object, Object)}, {@link ShoalMap#remove(Object, Object)}
 * and {@link ShoalCell#compareAndSet}: a codec must give equal values equal bytes
 * (a canonical encoding), or those calls see different values where {@code equals}
 * would not. Implementations must be thread-safe; {@link Codecs} has the standard ones,
 * whose bytes every language's binding reads the same way.
 *
 * @param <T> the Java type
 */
public interface Codec<T> {
    /**
     * Encodes a value.
     *
     * @param value a non-null value
     * @return its bytes (not retained: the caller may not change them afterwards)
     * @throws ClassCastException if {@code value} is not a {@code T}
     */
    byte[] encode(T value);

    /**
     * Decodes stored bytes.
     *
     * @param bytes what {@link #encode} gave, possibly written by another process or language
     * @return the value
     * @throws CodecException if the bytes are not a valid encoding
     */
    T decode(byte[] bytes);

    /**
     * The encoded size when every value has the same one (8 for {@link Codecs#LONG}), so
     * that {@link ShoalStore#fixedMap(String, Codec, Codec)} can size a fixed map; -1
     * otherwise.
     *
     * @return the fixed size in bytes, or -1
     */
    default int fixedSize() {
        return -1;
    }

    /**
     * The type a map created with this codec records for other programs (FORMAT.md, "Key
     * and value types"), and that a map opened with it must have recorded (or none, or
     * the codec's type is {@link DataType#BYTES}, which opens any map). Null, the default
     * for a codec of the application's own: nothing recorded, nothing checked.
     *
     * @return the recorded type, or null
     */
    default DataType dataType() {
        return null;
    }

    /**
     * A codec from two functions.
     *
     * @param <T> the Java type
     * @param encode value to bytes
     * @param decode bytes to value
     * @return the codec
     */
    static <T> Codec<T> of(java.util.function.Function<? super T, byte[]> encode,
            java.util.function.Function<byte[], ? extends T> decode) {
        return new Codec<T>() {
            @Override
            public byte[] encode(T value) {
                return encode.apply(value);
            }

            @Override
            public T decode(byte[] bytes) {
                return decode.apply(bytes);
            }
        };
    }

    /**
     * A codec from two functions that records {@code type} in the maps it creates (for
     * example {@code DataType.user(tag)} for an encoding of the application's own).
     *
     * @param <T> the Java type
     * @param type the type to record and to expect
     * @param encode value to bytes
     * @param decode bytes to value
     * @return the codec
     */
    static <T> Codec<T> of(DataType type, java.util.function.Function<? super T, byte[]> encode,
            java.util.function.Function<byte[], ? extends T> decode) {
        java.util.Objects.requireNonNull(type, "type");
        return new Codec<T>() {
            @Override
            public byte[] encode(T value) {
                return encode.apply(value);
            }

            @Override
            public T decode(byte[] bytes) {
                return decode.apply(bytes);
            }

            @Override
            public DataType dataType() {
                return type;
            }
        };
    }
}
