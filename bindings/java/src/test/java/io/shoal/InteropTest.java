package io.shoal;

import static org.junit.jupiter.api.Assertions.*;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Java reads what Python and C wrote, and they read what Java wrote, through the shared
 * codec conventions. The Python interpreter (with the shoal package) and the compiled C
 * program come from scripts/test-java.sh (shoal.test.python, shoal.test.cprog); there
 * shoal.test.requireInterop is set, so that a missing one fails instead of skipping.
 */
class InteropTest {
    private static String tool(String prop) {
        String p = System.getProperty(prop, "");
        if (Boolean.getBoolean("shoal.test.requireInterop")) {
            assertFalse(p.isEmpty(), prop + " is required");
        }
        assumeTrue(!p.isEmpty(), prop + " not set (scripts/test-java.sh sets it)");
        return p;
    }

    private static String run(List<String> cmd) throws Exception {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        byte[] out = p.getInputStream().readAllBytes();
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "timed out: " + cmd);
        String text = new String(out, StandardCharsets.UTF_8);
        assertEquals(0, p.exitValue(), cmd + " failed:\n" + text);
        return text;
    }

    private static void writeJava(Path file) {
        try (ShoalStore s = Shoal.open(file)) {
            ShoalMap<String, Long> si = s.map("j_str_int", Codecs.STRING, Codecs.LONG);
            si.put("a", 1L);
            si.put("é", -2L);
            s.map("j_str_str", Codecs.STRING, Codecs.STRING).put("k", "v€");
            s.map("j_bytes", Codecs.BYTES, Codecs.BYTES).put(new byte[] {0, 1}, new byte[] {(byte) 0xff});
            s.map("j_double", Codecs.STRING, Codecs.DOUBLE).put("pi", 3.25);
            s.map("j_int", Codecs.INTEGER, Codecs.INTEGER).put(-3, 2_000_000_000);
            s.fixedMap("j_fixed", Codecs.bytes(8), Codecs.LONG).addAndGet("counter1".getBytes(StandardCharsets.US_ASCII), 5);
            s.cell("j_cell", Codecs.LONG, 42L);
        }
    }

    @Test
    void pythonReadsJavaAndJavaReadsPython(@TempDir Path dir) throws Exception {
        String python = tool("shoal.test.python");
        Path file = dir.resolve("py.shoal");
        writeJava(file);
        String script = String.join("\n",
                "import shoal, sys",
                "s = shoal.open(sys.argv[1], create=False)",
                "assert dict(s.map('j_str_int', key='str', value='int')) == {'a': 1, 'é': -2}",
                "assert dict(s.map('j_str_str', key='str', value='str')) == {'k': 'v€'}",
                "assert dict(s.map('j_bytes')) == {b'\\x00\\x01': b'\\xff'}",
                "assert dict(s.map('j_double', key='str', value='float')) == {'pi': 3.25}",
                "assert dict(s.map('j_int', key='int', value='int')) == {-3: 2000000000}",
                "f = s.fixed_map('j_fixed', 8, 8)",
                "assert int.from_bytes(f[b'counter1'], 'little', signed=True) == 5",
                "assert s.map('j_cell', value='int')[b''] == 42",
                // Java recorded its codecs' types: Python needs no codec names.
                "assert dict(s.map('j_str_int')) == {'a': 1, 'é': -2}",
                "assert dict(s.map('j_double')) == {'pi': 3.25}",
                "t = s.map('p_typed', key='str', value='float')",
                "t['half'] = 0.5",
                "t['neg'] = -1e300",
                "tf = s.fixed_map('p_typed_fixed', 8, 8, key_type='u64', value_type='i64')",
                "tf[(2**64 - 1).to_bytes(8, 'little')] = (-7).to_bytes(8, 'little', signed=True)",
                "p = s.map('p_str_int', key='str', value='int')",
                "p['x'] = 7",
                "p['ü'] = -9",
                "s.map('p_str_str', key='str', value='str')['hello'] = 'wörld'",
                "s.map('p_cell', value='int')[b''] = 5",
                "s.fixed_map('p_fixed', 8, 8).add(b'counter2', 3)",
                "s.close()",
                "print('ok')");
        List<String> cmd = new ArrayList<>(List.of(python, "-c", script, file.toString()));
        assertTrue(run(cmd).contains("ok"));
        try (ShoalStore s = Shoal.open(file)) {
            assertEquals(Map.of("x", 7L, "ü", -9L), s.map("p_str_int", Codecs.STRING, Codecs.LONG));
            assertEquals(Map.of("hello", "wörld"), s.map("p_str_str", Codecs.STRING, Codecs.STRING));
            assertEquals(5L, s.cell("p_cell", Codecs.LONG, 0L).get());
            assertEquals(3L, s.fixedMap("p_fixed", Codecs.bytes(8), Codecs.LONG)
                    .get("counter2".getBytes(StandardCharsets.US_ASCII)));
            // Maps Python created with types open without codecs, decoded as recorded.
            ShoalMap<Object, Object> t = s.map("p_typed");
            assertSame(Codecs.STRING, t.keyCodec());
            assertSame(Codecs.DOUBLE, t.valueCodec());
            assertEquals(Map.of("half", 0.5, "neg", -1e300), new java.util.HashMap<>(t));
            ShoalMap<Object, Object> tf = s.fixedMap("p_typed_fixed");
            assertEquals(DataType.U64, tf.keyType());
            assertEquals(DataType.I64, tf.valueType());
            assertEquals(Map.of(-1L, -7L), new java.util.HashMap<>(tf));
            InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                    () -> s.map("p_typed", Codecs.STRING, Codecs.LONG));
            assertTrue(e.getMessage().contains("f64") && e.getMessage().contains("i64"), e.getMessage());
        }
    }

    @Test
    void cReadsJavaAndJavaReadsC(@TempDir Path dir) throws Exception {
        String prog = tool("shoal.test.cprog");
        Path file = dir.resolve("c.shoal");
        writeJava(file);
        assertTrue(run(List.of(prog, "read", file.toString())).contains("ok"));
        run(List.of(prog, "write", file.toString()));
        try (ShoalStore s = Shoal.open(file)) {
            ShoalMap<String, Long> m = s.map("c_map", Codecs.STRING, Codecs.LONG);
            assertEquals(10, m.size());
            for (int i = 0; i < 10; i++) {
                assertEquals((long) i * i - 5, m.get("c" + i));
            }
            assertEquals(77L, s.fixedMap("c_fixed", Codecs.bytes(8), Codecs.LONG)
                    .get("counter1".getBytes(StandardCharsets.US_ASCII)));
            // C recorded utf8 keys and i64 values: no codecs needed.
            ShoalMap<Object, Object> t = s.map("c_typed");
            assertEquals(DataType.UTF8, t.keyType());
            assertEquals(DataType.I64, t.valueType());
            assertEquals(Map.of("t0", -1L, "t1", 999L, "t2", 1999L, "t3", 2999L, "t4", 3999L),
                    new java.util.HashMap<>(t));
            assertThrows(InvalidArgumentException.class, () -> s.map("c_typed", Codecs.STRING, Codecs.STRING));
        }
    }

    /** Java's side of the queue passes: three elements out, four back (see interop.c "queue"). */
    private static ShoalQueueSet sendThree(ShoalStore s) {
        ShoalQueueSet qs = s.queueSet("jq", QueueOptions.of(32, 6).queue("to_other").queue("to_java"));
        int free = qs.queue("free"), other = qs.queue("to_other");
        for (int i = 0; i < 3; i++) {
            Element e = qs.pull(free);
            e.buffer().put(String.format("java%04d", i).getBytes(StandardCharsets.US_ASCII));
            qs.push(other, e);
        }
        return qs;
    }

    private static void expectBack(ShoalQueueSet qs, String mark, String fresh) {
        int free = qs.queue("free"), java = qs.queue("to_java");
        assertEquals(0, qs.len(qs.queue("to_other")));
        assertEquals(4, qs.len(java));
        for (int i = 0; i < 3; i++) {
            try (Element e = qs.pull(java)) {
                byte[] b = new byte[8];
                e.buffer().get(b);
                assertEquals(String.format("%s%04d", mark, i), new String(b, StandardCharsets.US_ASCII));
                qs.push(free, e);
            }
        }
        try (Element e = qs.pull(java)) {
            byte[] b = new byte[fresh.length()];
            e.buffer().get(b);
            assertEquals(fresh, new String(b, StandardCharsets.US_ASCII));
            qs.push(free, e);
        }
        assertEquals(6, qs.len(free));
    }

    @Test
    void queueElementsPassBetweenJavaAndPython(@TempDir Path dir) throws Exception {
        String python = tool("shoal.test.python");
        Path file = dir.resolve("pyq.shoal");
        try (ShoalStore s = Shoal.open(file); ShoalQueueSet qs = sendThree(s)) {
            String script = String.join("\n",
                    "import shoal, sys",
                    "s = shoal.open(sys.argv[1], create=False)",
                    "qs = s.queues('jq')",
                    "free, other, java = qs.queue('free'), qs.queue('to_other'), qs.queue('to_java')",
                    "for i in range(3):",
                    "    e = qs.pull_wait(other, 30)",
                    "    assert bytes(e.data[0:8]) == b'java%04d' % i, bytes(e.data[0:8])",
                    "    e.data[0:4] = b'pyth'",
                    "    qs.push(java, e)",
                    "e = qs.pull(free)",
                    "e.data[0:7] = b'from-py'",
                    "qs.push(java, e)",
                    "s.close()",
                    "print('ok')");
            assertTrue(run(List.of(python, "-c", script, file.toString())).contains("ok"));
            expectBack(qs, "pyth", "from-py");
        }
    }

    @Test
    void queueElementsPassBetweenJavaAndC(@TempDir Path dir) throws Exception {
        String prog = tool("shoal.test.cprog");
        Path file = dir.resolve("cq.shoal");
        try (ShoalStore s = Shoal.open(file); ShoalQueueSet qs = sendThree(s)) {
            assertTrue(run(List.of(prog, "queue", file.toString())).contains("ok"));
            expectBack(qs, "cccc", "from-c");
        }
    }
}
