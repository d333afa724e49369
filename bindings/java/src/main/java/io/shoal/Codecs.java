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
 * <tr><th>codec</th><th>Java type</th><th>bytes</th><th>Python codec</th></tr>
 * <tr><td>{@link #BYTES}</td><td>byte[]</td><td>as is</td><td>"bytes"</td></tr>
 * <tr><td>{@link #STRING}</td><td>String</td><td>UTF-8 (strict both ways: unpaired surrogates are refused)</td><td>"str"</td></tr>
 * <tr><td>{@link #LONG}</td><td>Long</td><td>8 bytes, two's complement, little-endian</td><td>"int"</td></tr>
 * <tr><td>{@link #INTEGER}</td><td>Integer</td><td>the same 8 bytes (decoding refuses a value outside int's range)</td><td>"int"</td></tr>
 * <tr><td>{@link #DOUBLE}</td><td>Double</td><td>8 bytes IEEE 754 binary64, little-endian</td><td>"float"</td></tr>
 * <tr><td>{@link #BYTE_BUFFER}</td><td>ByteBuffer</td><td>its remaining bytes, as is</td><td>"bytes"</td></tr>
 * </table>
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
    };

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
