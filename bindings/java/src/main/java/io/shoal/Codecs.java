package io.shoal;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * The standard codecs. Their bytes are the conventions every Shoal binding shares (the
 * Python binding's codecs of the same names, C programs reading the map), so that a map
 * written from Java reads the same from any language and the reverse:
 *
 * <table>
 * <caption>Encodings</caption>
 * <tr><th>codec</th><th>Java type</th><th>bytes</th><th>recorded type</th><th>Python codec</th></tr>
 * <tr><td>{@link #BYTES}</td><td>byte[]</td><td>as is</td><td>bytes</td><td>"bytes"</td></tr>
 * <tr><td>{@link #STRING}</td><td>String</td><td>UTF-8 (strict both ways: unpaired surrogates are refused)</td><td>utf8</td><td>"str"</td></tr>
 * <tr><td>{@link #LONG}</td><td>Long</td><td>8 bytes, two's complement, little-endian</td><td>i64</td><td>"int"</td></tr>
 * <tr><td>{@link #UNSIGNED_LONG}</td><td>Long (read as unsigned: {@link Long#toUnsignedString(long)})</td><td>8 bytes, little-endian</td><td>u64</td><td>"uint"</td></tr>
 * <tr><td>{@link #INTEGER}</td><td>Integer</td><td>the same 8 bytes (decoding refuses a value outside int's range)</td><td>i64</td><td>"int"</td></tr>
 * <tr><td>{@link #DOUBLE}</td><td>Double</td><td>8 bytes IEEE 754 binary64, little-endian</td><td>f64</td><td>"float"</td></tr>
 * <tr><td>{@link #JSON_TEXT}</td><td>String (the JSON text itself)</td><td>UTF-8 JSON text</td><td>json</td><td>"json"</td></tr>
 * <tr><td>{@link #BYTE_BUFFER}</td><td>ByteBuffer</td><td>its remaining bytes, as is</td><td>bytes</td><td>"bytes"</td></tr>
 * </table>
 *
 * <p>A map created with these codecs records their types in the file, so that programs in
 * every language decode it alike; {@link #forType} gives the codec a recorded type names
 * (what {@link ShoalStore#map(String)} opens a map with).
 *
 * <p>{@link ShoalMap#addAndGet} and {@link ShoalCell#addAndGet} work on values in the
 * {@link #LONG} layout, which is the engine's own counter format.
 */
public final class Codecs {
    private Codecs() {}

    /** Bytes as they are (the array is copied neither way: do not change it after a put). */
    public static final Codec<byte[]> BYTES = new Codec<byte[]>() {
        @Override
        public byte[] encode(byte[] value) {
            return value;
        }

        @Override
        public byte[] decode(byte[] bytes) {
            return bytes;
        }

        @Override
        public String toString() {
            return "Codecs.BYTES";
        }

        @Override
        public DataType dataType() {
            return DataType.BYTES;
        }
    };

    /** Strings as UTF-8. */
    public static final Codec<String> STRING = new Codec<String>() {
        @Override
        public byte[] encode(String value) {
            // String.getBytes would silently write '?' for an unpaired surrogate: a key
            // that no other language could write back. Refuse it instead.
            try {
                ByteBuffer b = StandardCharsets.UTF_8.newEncoder()
                        .onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT)
                        .encode(java.nio.CharBuffer.wrap(value));
                byte[] out = new byte[b.remaining()];
                b.get(out);
                return out;
            } catch (CharacterCodingException e) {
                throw new CodecException(0, "string is not encodable as UTF-8 (unpaired surrogate)");
            }
        }

        @Override
        public String decode(byte[] bytes) {
            CharsetDecoder d = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT);
            try {
                return d.decode(ByteBuffer.wrap(bytes)).toString();
            } catch (CharacterCodingException e) {
                throw new CodecException(0, "stored bytes are not UTF-8");
            }
        }

        @Override
        public String toString() {
            return "Codecs.STRING";
        }

        @Override
        public DataType dataType() {
            return DataType.UTF8;
        }
    };

    /** Longs as 8 bytes little-endian: the engine's counter format. */
    public static final Codec<Long> LONG = new Codec<Long>() {
        @Override
        public byte[] encode(Long value) {
            return le(value);
        }

        @Override
        public Long decode(byte[] bytes) {
            return unle(bytes, "Long");
        }

        @Override
        public int fixedSize() {
            return 8;
        }

        @Override
        public String toString() {
            return "Codecs.LONG";
        }

        @Override
        public DataType dataType() {
            return DataType.I64;
        }
    };

    /** Integers as the same 8 bytes as {@link #LONG}, so that every language reads them as integers. */
    public static final Codec<Integer> INTEGER = new Codec<Integer>() {
        @Override
        public byte[] encode(Integer value) {
            return le(value.longValue());
        }

        @Override
        public Integer decode(byte[] bytes) {
            long v = unle(bytes, "Integer");
            if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
                throw new CodecException(0, "stored integer " + v + " does not fit an Integer");
            }
            return (int) v;
        }

        @Override
        public int fixedSize() {
            return 8;
        }

        @Override
        public String toString() {
            return "Codecs.INTEGER";
        }

        @Override
        public DataType dataType() {
            return DataType.I64;
        }
    };

    /** Doubles as 8 bytes IEEE 754 little-endian (keys compare by bit pattern: 0.0 and -0.0 differ). */
    public static final Codec<Double> DOUBLE = new Codec<Double>() {
        @Override
        public byte[] encode(Double value) {
            return le(Double.doubleToRawLongBits(value));
        }

        @Override
        public Double decode(byte[] bytes) {
            return Double.longBitsToDouble(unle(bytes, "Double"));
        }

        @Override
        public int fixedSize() {
            return 8;
        }

        @Override
        public String toString() {
            return "Codecs.DOUBLE";
        }

        @Override
        public DataType dataType() {
            return DataType.F64;
        }
    };

    /**
     * Longs as the same 8 bytes as {@link #LONG}, recorded as unsigned ({@link DataType#U64}):
     * a stored value of 2^63 or more reads as a negative Long, whose unsigned value
     * {@link Long#toUnsignedString(long)} and {@link Long#compareUnsigned} give.
     */
    public static final Codec<Long> UNSIGNED_LONG = new Codec<Long>() {
        @Override
        public byte[] encode(Long value) {
            return le(value);
        }

        @Override
        public Long decode(byte[] bytes) {
            return unle(bytes, "unsigned long");
        }

        @Override
        public int fixedSize() {
            return 8;
        }

        @Override
        public String toString() {
            return "Codecs.UNSIGNED_LONG";
        }

        @Override
        public DataType dataType() {
            return DataType.U64;
        }
    };

    /**
     * JSON documents as their UTF-8 text ({@link DataType#JSON}), neither parsed nor
     * rewritten (Java has no JSON library of its own): a value is stored as given and read
     * back as the text another language wrote. Keys compare by their bytes, and other
     * languages write JSON keys in the canonical form (compact, object keys sorted): a key
     * written from Java must be in that form too to be the same key.
     */
    public static final Codec<String> JSON_TEXT = new Codec<String>() {
        @Override
        public byte[] encode(String value) {
            return STRING.encode(value);
        }

        @Override
        public String decode(byte[] bytes) {
            return STRING.decode(bytes);
        }

        @Override
        public String toString() {
            return "Codecs.JSON_TEXT";
        }

        @Override
        public DataType dataType() {
            return DataType.JSON;
        }
    };

    /**
     * The codec a recorded type names, for a map opened without codecs: {@link #STRING}
     * for utf8, {@link #LONG} for i64, {@link #UNSIGNED_LONG} for u64, {@link #DOUBLE} for
     * f64, {@link #JSON_TEXT} for json, and {@link #BYTES} for bytes, for none recorded
     * (null), for a {@link DataType#user} type (the application's own encoding, which only
     * the application decodes) and for a code this library does not know.
     *
     * @param type a recorded type, or null
     * @return the codec
     */
    public static Codec<?> forType(DataType type) {
        if (type == null) {
            return BYTES;
        }
        switch (type.code()) {
            case 2: return STRING;
            case 3: return LONG;
            case 4: return UNSIGNED_LONG;
            case 5: return DOUBLE;
            case 6: return JSON_TEXT;
            default: return BYTES;
        }
    }

    /**
     * A ByteBuffer's remaining bytes (its position is left alone); decoding gives a
     * read-write heap buffer. Unlike {@code byte[]}, ByteBuffers compare by content, so
     * values read back are {@code equals} to what was written.
     */
    public static final Codec<ByteBuffer> BYTE_BUFFER = new Codec<ByteBuffer>() {
        @Override
        public byte[] encode(ByteBuffer value) {
            byte[] out = new byte[value.remaining()];
            value.duplicate().get(out);
            return out;
        }

        @Override
        public ByteBuffer decode(byte[] bytes) {
            return ByteBuffer.wrap(bytes);
        }

        @Override
        public String toString() {
            return "Codecs.BYTE_BUFFER";
        }

        @Override
        public DataType dataType() {
            return DataType.BYTES;
        }
    };

    /**
     * A codec of exactly {@code size} bytes as they are, for the keys and values of a
     * fixed-size map ({@link ShoalStore#fixedMap(String, Codec, Codec)}).
     *
     * @param size the length every array must have (checked when encoding)
     * @return the codec
     */
    public static Codec<byte[]> bytes(int size) {
        if (size < 0) {
            throw new IllegalArgumentException("size < 0");
        }
        return new Codec<byte[]>() {
            @Override
            public byte[] encode(byte[] value) {
                if (value.length != size) {
                    throw new InvalidArgumentException(8, "expected " + size + " bytes, got " + value.length);
                }
                return value;
            }

            @Override
            public byte[] decode(byte[] bytes) {
                return bytes;
            }

            @Override
            public int fixedSize() {
                return size;
            }

            @Override
            public String toString() {
                return "Codecs.bytes(" + size + ")";
            }

            @Override
            public DataType dataType() {
                return DataType.BYTES;
            }
        };
    }

    static byte[] le(long v) {
        byte[] b = new byte[8];
        for (int i = 0; i < 8; i++) {
            b[i] = (byte) (v >>> (8 * i));
        }
        return b;
    }

    static long unle(byte[] b, String what) {
        if (b.length != 8) {
            throw new CodecException(0, "a stored " + what + " is 8 bytes, not " + b.length);
        }
        long v = 0;
        for (int i = 7; i >= 0; i--) {
            v = (v << 8) | (b[i] & 0xff);
        }
        return v;
    }
}
