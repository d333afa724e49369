package io.shoal;

import static org.junit.jupiter.api.Assertions.*;

import java.io.File;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Queue sets between JVMs: two processes pass elements back and forth in order; a process
 * killed with SIGKILL while it holds elements loses none of them: they come back (to the
 * queue they came from, marked redelivered, or to the initial queue), with what the dead
 * process wrote in them.
 */
class QueueMultiProcessTest {
    private static Process spawn(Path log, String... args) throws Exception {
        String java = ProcessHandle.current().info().command().orElseThrow();
        String cp = System.getProperty("shoal.test.jar") + File.pathSeparator + System.getProperty("shoal.test.classes");
        String[] cmd = new String[args.length + 4];
        cmd[0] = java;
        cmd[1] = "-cp";
        cmd[2] = cp;
        cmd[3] = QueueWorker.class.getName();
        System.arraycopy(args, 0, cmd, 4, args.length);
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.redirectErrorStream(true);
        pb.redirectOutput(log.toFile());
        return pb.start();
    }

    private static Path logs(String name) throws Exception {
        return Files.createDirectories(Paths.get(System.getProperty("java.io.tmpdir"), name));
    }

    @Test
    void twoJvmsPassElementsInOrder() throws Exception {
        assertNotNull(System.getProperty("shoal.test.classes"), "shoal.test.classes (set by the pom)");
        String name = TestStores.name("qpp");
        Path log = logs(name).resolve("relay.log");
        int rounds = 2000;
        try (ShoalStore store = Shoal.open(name);
                ShoalQueueSet qs = store.queueSet("pp", QueueOptions.of(16, 4).queue("a2b").queue("b2a"))) {
            int free = qs.queue("free"), a2b = qs.queue("a2b"), b2a = qs.queue("b2a");
            Process relay = spawn(log, "relay", name, Integer.toString(rounds));
            // Four elements in flight at once: they must come back in the order sent.
            long sent = 0;
            for (Element e : qs.pullMany(free, 4)) {
                e.buffer().order(ByteOrder.LITTLE_ENDIAN).putLong(0, sent++);
                qs.push(a2b, e);
            }
            for (long got = 0; got < rounds; got++) {
                Element e = qs.pull(b2a, Duration.ofSeconds(60));
                assertNotNull(e, "nothing back in 60 s after " + got + ": " + Files.readString(log));
                ByteBuffer b = e.buffer().order(ByteOrder.LITTLE_ENDIAN);
                assertEquals(got + 1_000_000, b.getLong(0), "element " + got + " out of order");
                if (sent < rounds) {
                    b.putLong(0, sent++);
                    qs.push(a2b, e);
                } else {
                    qs.push(free, e);
                }
            }
            assertTrue(relay.waitFor(120, TimeUnit.SECONDS), "the relay did not end");
            assertEquals(0, relay.exitValue(), Files.readString(log));
            assertEquals(4, qs.len(free));
            assertEquals(0, qs.len(a2b) + qs.len(b2a));
        } finally {
            TestStores.remove(name);
        }
    }

    private static Set<Long> indexes(String csv) {
        Set<Long> r = new TreeSet<>();
        for (String s : csv.split(",")) {
            r.add(Long.parseLong(s));
        }
        return r;
    }

    private static String at8(Element e) {
        byte[] b = new byte[6];
        e.buffer().get(8, b);
        return new String(b, StandardCharsets.US_ASCII);
    }

    @Test
    void elementsHeldByAKilledJvmComeBack() throws Exception {
        assertNotNull(System.getProperty("shoal.test.classes"), "shoal.test.classes (set by the pom)");
        String name = TestStores.name("qkill");
        Path log = logs(name).resolve("victim.log");
        int n = 10;
        try (ShoalStore store = Shoal.open(name);
                ShoalQueueSet kr = store.queueSet("kr", QueueOptions.of(64, n).queue("work").redeliver(true));
                ShoalQueueSet kf = store.queueSet("kf", QueueOptions.of(64, n).queue("work"))) {
            for (ShoalQueueSet qs : new ShoalQueueSet[] {kr, kf}) {
                int free = qs.queue("free"), work = qs.queue("work");
                for (int i = 0; i < n; i++) {
                    Element e = qs.pull(free);
                    e.buffer().order(ByteOrder.LITTLE_ENDIAN).putLong(0, 100 + e.index());
                    qs.push(work, e);
                }
                assertEquals(0, qs.len(free));
            }
            ShoalMap<String, String> held = store.map("held", Codecs.STRING, Codecs.STRING);
            Process victim = spawn(log, "hold", name);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (!held.containsKey("kr")) {
                assertTrue(victim.isAlive(), "the victim died on its own: " + Files.readString(log));
                assertTrue(System.nanoTime() < deadline, "the victim held nothing in 120 s");
                Thread.sleep(5);
            }
            Set<Long> heldR = indexes(held.get("kr"));
            Set<Long> heldF = indexes(held.get("kf"));
            assertEquals(3, heldR.size());
            assertEquals(2, heldF.size());
            int workR = kr.queue("work"), workF = kf.queue("work"), freeF = kf.queue("free");
            assertEquals(n - 3, kr.len(workR));
            assertEquals(n - 2, kf.len(workF));

            victim.destroyForcibly(); // SIGKILL on Linux
            assertTrue(victim.waitFor(60, TimeUnit.SECONDS), "the victim did not die");
            assertEquals(137, victim.exitValue(), "killed by SIGKILL");

            // Redelivered set: reclaim() hands them back to "work" (bounded retries: the
            // library sees the death through the victim's process slot).
            long back = 0;
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (back < 3) {
                back += kr.reclaim();
                assertTrue(System.nanoTime() < deadline, "only " + back + " of 3 elements came back in 60 s");
                if (back < 3) {
                    Thread.sleep(10);
                }
            }
            assertEquals(3, back);
            assertEquals(n, kr.len(workR));
            Set<Long> ids = new HashSet<>();
            Set<Long> redelivered = new TreeSet<>();
            for (int i = 0; i < n; i++) {
                try (Element e = kr.pull(workR)) {
                    assertNotNull(e);
                    assertTrue(ids.add(e.buffer().order(ByteOrder.LITTLE_ENDIAN).getLong(0)), "an element twice");
                    assertEquals(100 + e.index(), e.buffer().order(ByteOrder.LITTLE_ENDIAN).getLong(0));
                    if (e.redelivered()) {
                        redelivered.add(e.index());
                        assertEquals("victim", at8(e), "what the dead holder wrote stays");
                    }
                    assertEquals(workR, e.fromQueue());
                    kr.push(kr.queue("free"), e);
                }
            }
            assertEquals(n, ids.size());
            assertEquals(heldR, redelivered, "exactly the dead holder's elements are marked redelivered");

            // The other set: no redelivery, so they go to its initial queue ("free"), which
            // is empty now: a waiting pull finds them by itself, with no reclaim call.
            Set<Long> returned = new TreeSet<>();
            for (int i = 0; i < 2; i++) {
                Element e = kf.pull(freeF, Duration.ofSeconds(60));
                assertNotNull(e, "the dead holder's element " + i + " did not come back in 60 s");
                assertFalse(e.redelivered());
                assertEquals("victim", at8(e));
                returned.add(e.index());
                e.close();
            }
            assertEquals(heldF, returned);
            assertEquals(2, kf.len(freeF));
            assertEquals(n - 2, kf.len(workF));
            assertEquals(0, kf.reclaim() + kr.reclaim(), "nothing left to hand back");
        } finally {
            TestStores.remove(name);
        }
    }
}
