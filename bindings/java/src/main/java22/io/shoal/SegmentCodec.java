package io.shoal;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * A codec of {@link MemorySegment}s (Java 22+ only: this class is in the jar's
 * {@code META-INF/versions/22}): a segment's bytes, as is; decoding gives a heap segment.
 * The same bytes as {@link Codecs#BYTES}.
 */
public final class SegmentCodec implements Codec<MemorySegment> {
    /** The codec. */
    public static final SegmentCodec INSTANCE = new SegmentCodec();

    private SegmentCodec() {}

    @Override
    public byte[] encode(MemorySegment value) {
        return value.toArray(ValueLayout.JAVA_BYTE);
    }

    @Override
    public MemorySegment decode(byte[] bytes) {
        return MemorySegment.ofArray(bytes);
    }

    @Override
    public String toString() {
        return "SegmentCodec.INSTANCE";
    }
}
