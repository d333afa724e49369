package io.shoal;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The key and value types a map records (FORMAT.md, "Key and value types"): a map created
 * with codecs records theirs, a map opened without codecs takes the recorded ones, a codec
 * of another type is refused, and the bytes codec opens anything.
 */
class TypesTest {
    private String name;
    private ShoalStore s;

    @BeforeEach
    void open() {
        name = TestStores.name("types");
        s = Shoal.open(name);
    }

    @AfterEach
    void close() {
        s.close();
        TestStores.remove(name);
    }

    @Test
    void codecsRecordTheirTypesAndAMapOpensWithThem() {
        s.map("m", Codecs.STRING, Codecs.LONG).put("a", -5L);
        ShoalMap<Object, Object> m = s.map("m");
        assertEquals(DataType.UTF8, m.keyType());
        assertEquals(DataType.I64, m.valueType());
        assertSame(Codecs.STRING, m.keyCodec());
        assertSame(Codecs.LONG, m.valueCodec());
        assertEquals(-5L, m.get("a"));
        m.put("b", 7L);
        assertEquals(Map.of("a", -5L, "b", 7L), new HashMap<>(s.map("m", Codecs.STRING, Codecs.LONG)));
        // Integer is the same i64 bytes: it opens the map too.
        assertEquals(-5, s.map("m", Codecs.STRING, Codecs.INTEGER).get("a"));

        s.map("d", Codecs.DOUBLE, Codecs.JSON_TEXT).put(1.5, "{\"a\":[1,2]}");
        ShoalMap<Object, Object> d = s.map("d");
        assertEquals(DataType.F64, d.keyType());
        assertEquals(DataType.JSON, d.valueType());
        assertEquals("{\"a\":[1,2]}", d.get(1.5));

        s.map("u", Codecs.UNSIGNED_LONG, Codecs.BYTE_BUFFER).put(-1L, java.nio.ByteBuffer.wrap(new byte[] {9}));
        ShoalMap<Object, Object> u = s.map("u");
        assertEquals(DataType.U64, u.keyType());
        assertEquals(DataType.BYTES, u.valueType());
        assertArrayEquals(new byte[] {9}, (byte[]) u.get(-1L));
    }

    @Test
    void aConflictingCodecIsRefusedAndBytesOpensAnything() {
        s.map("m", Codecs.STRING, Codecs.LONG).put("a", 1L);
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                () -> s.map("m", Codecs.STRING, Codecs.STRING));
        assertTrue(e.getMessage().contains("i64") && e.getMessage().contains("utf8"), e.getMessage());
        assertThrows(InvalidArgumentException.class, () -> s.map("m", Codecs.LONG, Codecs.LONG));
        assertThrows(InvalidArgumentException.class, () -> s.map("m", Codecs.STRING, Codecs.UNSIGNED_LONG));
        assertThrows(InvalidArgumentException.class, () -> s.map("m", Codecs.STRING, Codecs.DOUBLE));
        // Bytes reads the raw bytes of any map, and a map with bytes keys still types its values.
        ShoalMap<byte[], byte[]> raw = s.map("m", Codecs.BYTES, Codecs.BYTES);
        assertArrayEquals(new byte[] {1, 0, 0, 0, 0, 0, 0, 0}, raw.get("a".getBytes(StandardCharsets.UTF_8)));
        assertEquals(1L, s.map("m", Codecs.BYTES, Codecs.LONG).get("a".getBytes(StandardCharsets.UTF_8)));
        // A codec of the application's own records nothing and checks nothing.
        Codec<String> own = Codec.of(x -> x.getBytes(StandardCharsets.UTF_8), b -> new String(b, StandardCharsets.UTF_8));
        assertNull(own.dataType());
        assertEquals(8, s.map("m", own, Codecs.BYTES).get("a").length);
    }

    @Test
    void userTagsAreRecordedAndCompared() {
        Codec<String> v1 = Codec.of(DataType.user(0x42), x -> x.getBytes(StandardCharsets.UTF_8),
                b -> new String(b, StandardCharsets.UTF_8));
        Codec<String> v2 = Codec.of(DataType.user(0x43), x -> x.getBytes(StandardCharsets.UTF_8),
                b -> new String(b, StandardCharsets.UTF_8));
        s.map("m", Codecs.STRING, v1).put("k", "v");
        ShoalMap<Object, Object> m = s.map("m");
        assertEquals(DataType.user(0x42), m.valueType());
        assertEquals("user:0x42", m.valueType().name());
        // The application's own encoding opens as bytes without its codec.
        assertSame(Codecs.BYTES, m.valueCodec());
        assertThrows(InvalidArgumentException.class, () -> s.map("m", Codecs.STRING, v2));
        assertEquals("v", s.map("m", Codecs.STRING, v1).get("k"));
    }

    @Test
    void aMapWithoutTypesOpensAsBytesAndTakesAnyCodec() {
        Codec<byte[]> untyped = Codec.of(b -> b, b -> b);
        s.map("plain", untyped, untyped).put(new byte[] {1}, new byte[] {2});
        ShoalMap<Object, Object> m = s.map("plain");
        assertNull(m.keyType());
        assertNull(m.valueType());
        assertSame(Codecs.BYTES, m.keyCodec());
        assertArrayEquals(new byte[] {2}, (byte[]) m.get(new byte[] {1}));
        // Nothing recorded: any codec opens it, and opening records nothing.
        s.map("plain", Codecs.STRING, Codecs.STRING);
        assertNull(s.map("plain").keyType());
        // A map opened without codecs and created by that call records nothing either.
        assertNull(s.map("fresh").valueType());
        assertThrows(NotFoundException.class, () -> s.map("missing", MapOptions.defaults().create(false)));
    }

    @Test
    void fixedMapsRecordNumbersAndOpenWithThem() {
        s.fixedMap("f", Codecs.LONG, Codecs.DOUBLE).put(3L, 0.25);
        ShoalMap<Object, Object> f = s.fixedMap("f");
        assertTrue(f.isFixed());
        assertEquals(DataType.I64, f.keyType());
        assertEquals(DataType.F64, f.valueType());
        assertEquals(0.25, f.get(3L));
        assertThrows(InvalidArgumentException.class, () -> s.fixedMap("f", Codecs.UNSIGNED_LONG, Codecs.DOUBLE));
        assertThrows(InvalidArgumentException.class, () -> s.fixedMap("f", Codecs.LONG, Codecs.LONG));
        assertEquals(0.25, s.fixedMap("f", Codecs.bytes(8), Codecs.DOUBLE).get(Codecs.LONG.encode(3L)));

        // Bytes of another size than 8: a bytes codec of the map's size.
        s.fixedMap("b", Codecs.bytes(4), Codecs.UNSIGNED_LONG).addAndGet(new byte[] {1, 2, 3, 4}, 10);
        ShoalMap<Object, Object> b = s.fixedMap("b");
        assertEquals(4, b.keyCodec().fixedSize());
        assertEquals(DataType.U64, b.valueType());
        assertEquals(10L, b.get(new byte[] {1, 2, 3, 4}));

        assertThrows(NotFoundException.class, () -> s.fixedMap("nope"));
        s.map("var", Codecs.STRING, Codecs.STRING);
        assertThrows(InvalidArgumentException.class, () -> s.fixedMap("var"));
    }

    @Test
    void forTypeNamesTheDefaultCodecs() {
        assertSame(Codecs.BYTES, Codecs.forType(null));
        assertSame(Codecs.BYTES, Codecs.forType(DataType.BYTES));
        assertSame(Codecs.STRING, Codecs.forType(DataType.UTF8));
        assertSame(Codecs.LONG, Codecs.forType(DataType.I64));
        assertSame(Codecs.UNSIGNED_LONG, Codecs.forType(DataType.U64));
        assertSame(Codecs.DOUBLE, Codecs.forType(DataType.F64));
        assertSame(Codecs.JSON_TEXT, Codecs.forType(DataType.JSON));
        assertSame(Codecs.BYTES, Codecs.forType(DataType.user(7)));
        DataType future = DataType.of(9, 0);
        assertFalse(future.isKnown());
        assertEquals("unknown:9", future.name());
        assertSame(Codecs.BYTES, Codecs.forType(future));
    }
}
