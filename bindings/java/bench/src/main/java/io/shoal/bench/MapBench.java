package io.shoal.bench;

import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * get, put and a 98/2 get/put mix on uniformly random keys among {@code keys} 16-byte
 * keys with 16-byte values, one thread per JVM. Every key looked up is present.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 2)
@Fork(value = 1, jvmArgsAppend = {"-Xms6g", "-Xmx6g"})
public class MapBench {
    @Param({"1000000", "10000000"})
    public int keys;

    @Param({"shoal", "shoal-fixed", "chronicle", "chm"})
    public String impl;

    private Maps.KV kv;

    @Setup(Level.Trial)
    public void open() throws Exception {
        kv = Maps.open(impl, keys);
    }

    @TearDown(Level.Trial)
    public void close() {
        kv.close();
    }

    @State(Scope.Thread)
    public static class Local {
        final SplittableRandom rnd = new SplittableRandom(42);
        final byte[] key = new byte[16];
        final byte[] value = new byte[16];
    }

    @Benchmark
    public byte[] get(Local l) {
        Maps.key(l.rnd.nextInt(keys), l.key);
        return kv.get(l.key);
    }

    @Benchmark
    public void put(Local l) {
        long i = l.rnd.nextInt(keys);
        Maps.key(i, l.key);
        l.value[0]++;
        kv.put(l.key, l.value.clone());
    }

    @Benchmark
    public Object mix98get2put(Local l) {
        long i = l.rnd.nextInt(keys);
        Maps.key(i, l.key);
        if (l.rnd.nextInt(100) < 2) {
            l.value[0]++;
            kv.put(l.key, l.value.clone());
            return null;
        }
        return kv.get(l.key);
    }
}
