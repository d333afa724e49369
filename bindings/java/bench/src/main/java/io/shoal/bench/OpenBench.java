package io.shoal.bench;

import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Time to open an existing store of {@code keys} entries in a fresh JVM and read one key:
 * one shot per fork (no warm-up), so that every open is a first open of that file in its
 * process. With {@code warm} false the shot also pays for loading the library and its
 * classes (the native library and its linking for Shoal, the generated code of Chronicle
 * Map); with {@code warm} true they are loaded first, by a tiny map of each kind, and the
 * shot measures the store's own open. The files must exist (MapBench fills them).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 0)
@Measurement(iterations = 1)
@Fork(value = 5, jvmArgsAppend = {"-Xmx2g"})
public class OpenBench {
    @Param({"10000000"})
    public int keys;

    @Param({"shoal", "chronicle"})
    public String impl;

    @Param({"false", "true"})
    public boolean warm;

    @org.openjdk.jmh.annotations.Setup
    public void warmUp() throws Exception {
        if (!warm) {
            return;
        }
        byte[] k = new byte[16];
        if (impl.equals("chronicle")) {
            try (var m = net.openhft.chronicle.map.ChronicleMap.of(byte[].class, byte[].class)
                    .constantKeySizeBySample(k).constantValueSizeBySample(k).entries(10).create()) {
                m.put(k, k);
                m.get(k);
            }
        } else {
            String name = "shoal-bench-warm-" + ProcessHandle.current().pid();
            try (var store = io.shoal.Shoal.open(name)) {
                var m = store.map("var", io.shoal.Codecs.BYTES, io.shoal.Codecs.BYTES);
                m.set(k, k);
                m.get(k);
            } finally {
                io.shoal.Shoal.remove(name);
            }
        }
    }

    @Benchmark
    public byte[] openAndGet() throws Exception {
        byte[] k = new byte[16];
        Maps.key(keys / 2, k);
        if (impl.equals("chronicle")) {
            try (var m = Maps.chronicleOpen(keys)) {
                return m.get(k);
            }
        }
        try (var store = io.shoal.Shoal.open(Maps.shoalName(keys))) {
            return store.map("var", io.shoal.Codecs.BYTES, io.shoal.Codecs.BYTES).get(k);
        }
    }
}
