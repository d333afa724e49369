package io.shoal;

import static org.junit.jupiter.api.Assertions.*;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Several JVMs increment the same keys and one cell; one of them is killed with SIGKILL
 * mid-run. Every acknowledged increment must be in the totals, exactly once: the
 * survivors' iterations exactly, the killed worker's first {@code acks} iterations exactly,
 * and at most its one iteration in flight besides. Then this process writes to the same
 * keys, which only works at once if the dead worker left nothing locked.
 */
class MultiProcessTest {
    private static final int KEYS = 7;
    private static final int SURVIVORS = 3;
    private static final long ITERATIONS = 20_000;

    private static Process spawn(String store, String id, long iterations, Path log) throws Exception {
        String java = ProcessHandle.current().info().command().orElseThrow();
        String cp = System.getProperty("shoal.test.jar") + File.pathSeparator + System.getProperty("shoal.test.classes");
        // No JVM flags: the jar must work without any.
        ProcessBuilder pb = new ProcessBuilder(java, "-cp", cp, CounterWorker.class.getName(), store, id,
                Long.toString(iterations), Integer.toString(KEYS), Integer.toString(SURVIVORS + 1));
        pb.redirectErrorStream(true);
        pb.redirectOutput(log.toFile());
        return pb.start();
    }

    @Test
    void killedWorkerLosesNoAcknowledgedUpdate() throws Exception {
        assertNotNull(System.getProperty("shoal.test.classes"), "shoal.test.classes (set by the pom)");
        String name = TestStores.name("procs");
        Path logs = Files.createDirectories(Paths.get(System.getProperty("java.io.tmpdir"), name));
        try (ShoalStore store = Shoal.open(name)) {
            ShoalMap<String, Long> counts = store.map("counts", Codecs.STRING, Codecs.LONG);
            ShoalMap<String, Long> acks = store.map("acks", Codecs.STRING, Codecs.LONG);
            ShoalCell<Long> total = store.cell("total", Codecs.LONG, 0L);
            List<Process> survivors = new ArrayList<>();
            for (int i = 0; i < SURVIVORS; i++) {
                survivors.add(spawn(name, "s" + i, ITERATIONS, logs.resolve("s" + i + ".log")));
            }
            Process victim = spawn(name, "victim", -1, logs.resolve("victim.log"));

            // Kill the victim once it is well into its run (bounded wait).
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(180);
            while (acks.getOrDefault("victim", 0L) < 1000) {
                assertTrue(victim.isAlive(), "the victim died on its own: " + Files.readString(logs.resolve("victim.log")));
                assertTrue(System.nanoTime() < deadline, "the victim did not reach 1000 iterations in 180 s");
                Thread.sleep(5);
            }
            StringBuilder progress = new StringBuilder();
            for (int i = 0; i < SURVIVORS; i++) {
                progress.append(" s").append(i).append('=').append(acks.getOrDefault("s" + i, 0L));
            }
            victim.destroyForcibly(); // SIGKILL on Linux
            assertTrue(victim.waitFor(60, TimeUnit.SECONDS), "the victim did not die");
            assertEquals(137, victim.exitValue(), "killed by SIGKILL");
            System.out.println("victim killed at " + acks.get("victim") + " acknowledged iterations;"
                    + " survivors were at" + progress);

            for (int i = 0; i < SURVIVORS; i++) {
                Process p = survivors.get(i);
                assertTrue(p.waitFor(240, TimeUnit.SECONDS), "survivor " + i + " did not finish in 240 s");
                assertEquals(0, p.exitValue(), "survivor " + i + ": " + Files.readString(logs.resolve("s" + i + ".log")));
            }

            long n = acks.get("victim");
            long[] expectedMin = new long[KEYS];
            for (int i = 0; i < SURVIVORS; i++) {
                assertEquals(ITERATIONS, acks.get("s" + i));
                for (int k = 0; k < KEYS; k++) {
                    expectedMin[k] += ITERATIONS / KEYS + (k < ITERATIONS % KEYS ? 1 : 0);
                }
            }
            for (int k = 0; k < KEYS; k++) {
                expectedMin[k] += n / KEYS + (k < n % KEYS ? 1 : 0);
            }
            int inFlightKey = (int) (n % KEYS);
            long sum = 0;
            for (int k = 0; k < KEYS; k++) {
                long got = counts.get("k" + k);
                sum += got;
                long max = expectedMin[k] + (k == inFlightKey ? 1 : 0);
                assertTrue(got >= expectedMin[k] && got <= max,
                        "k" + k + " = " + got + ", expected " + expectedMin[k] + (max > expectedMin[k] ? " or " + max : ""));
            }
            long iterationsMin = SURVIVORS * ITERATIONS + n;
            assertTrue(sum == iterationsMin || sum == iterationsMin + 1, "keys sum to " + sum + ", expected " + iterationsMin);
            long cell = total.get();
            assertTrue(cell == iterationsMin || cell == iterationsMin + 1, "cell " + cell + ", expected " + iterationsMin);

            // Nothing left locked by the dead process: writes to every key go through.
            for (int k = 0; k < KEYS; k++) {
                long before = counts.get("k" + k);
                assertEquals(before + 1, counts.merge("k" + k, 1L, Long::sum));
                assertEquals(before + 2, counts.addAndGet("k" + k, 1));
            }
            assertEquals(cell + 1, total.updateAndGet(x -> x + 1));
        } finally {
            TestStores.remove(name);
        }
    }
}
