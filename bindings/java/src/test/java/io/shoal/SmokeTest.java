package io.shoal;

import static org.junit.jupiter.api.Assertions.*;

import org.junit.jupiter.api.Test;

class SmokeTest {
    @Test
    void putGet() {
        String name = "java-smoke-" + ProcessHandle.current().pid();
        try (ShoalStore s = Shoal.open(name)) {
            ShoalMap<String, Long> m = s.map("m", Codecs.STRING, Codecs.LONG);
            assertNull(m.put("a", 1L));
            assertEquals(1L, m.put("a", 2L));
            assertEquals(2L, m.get("a"));
            assertEquals(5L, m.addAndGet("a", 3));
            System.out.println("backend " + Shoal.backend() + " version " + Shoal.version());
        } finally {
            Shoal.remove(name);
        }
    }
}
