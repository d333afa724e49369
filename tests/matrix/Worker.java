import io.shoal.Codecs;
import io.shoal.DataType;
import io.shoal.Shoal;
import io.shoal.ShoalMap;
import io.shoal.ShoalStore;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.function.Supplier;
import net.openhft.hashing.LongHashFunction;

/**
 * The Java worker of the cross-language matrix (scripts/test-matrix.sh describes the
 * protocol every language's worker follows), on the Java binding. The golden vectors are
 * checked with net.openhft's zero-allocation-hashing XXH3. Maps created with codecs record
 * their types; the other languages' keys are read through maps opened without codecs
 * ({@code store.map(name)}, {@code store.fixedMap(name)}), whose codecs come from the
 * recorded types.
 *
 * <pre>java -cp ... Worker STORE LANG LANGS KEYS ADDS VECTORS</pre>
 */
public final class Worker {
    private static final long WAIT_NANOS = 180_000_000_000L;

    static final class Failure extends RuntimeException {
        Failure(String m) {
            super(m);
        }
    }

    static int golden(Path path) throws Exception {
        int n = 0;
        for (String line : Files.readAllLines(path, StandardCharsets.UTF_8)) {
            if (line.isEmpty() || line.startsWith("#")) {
                continue;
            }
            String[] f = line.split("\t", -1);
            if (f.length != 8) {
                throw new Failure("golden vector line " + line + ": 8 fields expected");
            }
            byte[] key = f[1].equals("-") ? new byte[0] : HexFormat.of().parseHex(f[1]);
            long h = LongHashFunction.xx3(num(f[0])).hashBytes(key);
            long[] got = {h, h >>> 48, h >>> 56, ((h >>> 32) & 0xffff) * 59 >>> 16, ((h >>> 16) & 0xffff) % 4, h & 15};
            String[] names = {"hash", "tag", "cell tag", "home", "stash", "dir"};
            for (int i = 0; i < 6; i++) {
                if (got[i] != num(f[i + 2])) {
                    throw new Failure("golden vector " + n + " (key " + f[1] + "): " + names[i] + " 0x"
                            + Long.toHexString(got[i]) + ", want " + f[i + 2]);
                }
            }
            n++;
        }
        if (n == 0) {
            throw new Failure(path + ": no vectors");
        }
        return n;
    }

    static long num(String s) {
        return s.startsWith("0x") ? Long.parseUnsignedLong(s.substring(2), 16) : Long.parseLong(s);
    }

    static String varValue(String lang, long i) {
        return lang + ":" + i + ":é€";
    }

    static byte[] fixedKey(String lang, long i) {
        StringBuilder b = new StringBuilder(lang.length() > 10 ? lang.substring(0, 10) : lang);
        while (b.length() < 10) {
            b.append('.');
        }
        return (b + String.format("%06d", i)).getBytes(StandardCharsets.US_ASCII);
    }

    static <T> T waitFor(long start, Supplier<String> what, Supplier<T> get) throws InterruptedException {
        for (;;) {
            T v = get.get();
            if (v != null) {
                return v;
            }
            if (System.nanoTime() - start > WAIT_NANOS) {
                throw new Failure("timed out waiting for " + what.get());
            }
            Thread.sleep(5);
        }
    }

    static void run(String[] a) throws Exception {
        String lang = a[1];
        List<String> langs = Arrays.asList(a[2].split(","));
        long id = langs.indexOf(lang);
        if (id < 0) {
            throw new Failure(lang + " is not in " + langs);
        }
        long keys = Long.parseLong(a[3]);
        long adds = Long.parseLong(a[4]);
        int vectors = golden(Path.of(a[5]));
        long start = System.nanoTime();

        try (ShoalStore s = Shoal.open(a[0])) {
            ShoalMap<String, String> sync = s.map("mx_sync", Codecs.STRING, Codecs.STRING);
            ShoalMap<String, String> var = s.map("mx_var", Codecs.STRING, Codecs.STRING);
            ShoalMap<byte[], Double> fixed = s.fixedMap("mx_fixed", Codecs.bytes(16), Codecs.DOUBLE);
            ShoalMap<Long, Long> inline = s.fixedMap("mx_inline", Codecs.UNSIGNED_LONG, Codecs.LONG);
            ShoalMap<Long, Long> countFixed = s.fixedMap("mx_count_fixed", Codecs.UNSIGNED_LONG, Codecs.LONG);
            ShoalMap<String, Long> countVar = s.map("mx_count_var", Codecs.STRING, Codecs.LONG);

            sync.put("ready/" + lang, "1");
            for (String l : langs) {
                waitFor(start, () -> l + " to start (ready/" + l + ")", () -> sync.get("ready/" + l));
            }

            for (long i = 0; i < keys; i++) {
                var.put(lang + "/" + i, varValue(lang, i));
                fixed.put(fixedKey(lang, i), (double) (id * 1000 + i) + 0.25);
                inline.put((id + 1) << 32 | i, -(id * 1000 + i) - 1);
            }
            for (long r = 0; r < adds; r++) {
                countFixed.addAndGet(r % 4, 1);
                countVar.addAndGet("total", 1);
            }
            sync.put("done/" + lang, "1");

            // Opened without codecs: the codecs come from the types the maps recorded.
            ShoalMap<Object, Object> varAny = s.map("mx_var");
            ShoalMap<Object, Object> fixedAny = s.fixedMap("mx_fixed");
            ShoalMap<Object, Object> inlineAny = s.fixedMap("mx_inline");
            if ((Object) varAny.valueCodec() != Codecs.STRING || (Object) fixedAny.valueCodec() != Codecs.DOUBLE
                    || (Object) inlineAny.keyCodec() != Codecs.UNSIGNED_LONG || !DataType.I64.equals(inlineAny.valueType())) {
                throw new Failure("recorded types differ from the protocol's: " + varAny.valueType() + ", "
                        + fixedAny.valueType() + ", " + inlineAny.keyType() + "/" + inlineAny.valueType());
            }
            long checked = 0;
            for (int o = 0; o < langs.size(); o++) {
                String other = langs.get(o);
                for (long i = 0; i < keys; i++) {
                    String k = other + "/" + i;
                    Object v = waitFor(start, () -> other + "'s key \"" + k + "\" in mx_var", () -> varAny.get(k));
                    if (!varValue(other, i).equals(v)) {
                        throw new Failure(other + "'s key \"" + k + "\" in mx_var: \"" + v + "\", want \""
                                + varValue(other, i) + "\"");
                    }
                    byte[] fk = fixedKey(other, i);
                    String fks = new String(fk, StandardCharsets.US_ASCII);
                    Object d = waitFor(start, () -> other + "'s key \"" + fks + "\" in mx_fixed", () -> fixedAny.get(fk));
                    double want = (double) (o * 1000L + i) + 0.25;
                    if (!Double.valueOf(want).equals(d)) {
                        throw new Failure(other + "'s key \"" + fks + "\" in mx_fixed: " + d + ", want " + want);
                    }
                    long ik = (long) (o + 1) << 32 | i;
                    Object iv = waitFor(start, () -> other + "'s key " + ik + " in mx_inline", () -> inlineAny.get(ik));
                    long wi = -(o * 1000L + i) - 1;
                    if (!Long.valueOf(wi).equals(iv)) {
                        throw new Failure(other + "'s key " + ik + " in mx_inline: " + iv + ", want " + wi);
                    }
                    checked += 3;
                }
            }

            for (String l : langs) {
                waitFor(start, () -> l + " to finish (done/" + l + ")", () -> sync.get("done/" + l));
            }
            long n = langs.size();
            Object total = s.map("mx_count_var").get("total");
            if (!Long.valueOf(n * adds).equals(total)) {
                throw new Failure("mx_count_var \"total\": " + total + ", want " + n * adds);
            }
            for (long c = 0; c < 4; c++) {
                Long got = countFixed.get(c);
                long want = n * (adds / 4 + (c < adds % 4 ? 1 : 0));
                if (got == null || got != want) {
                    throw new Failure("mx_count_fixed key " + c + ": " + got + ", want " + want);
                }
            }
            System.out.println("matrix " + lang + ": ok (" + vectors + " golden vectors; " + checked + " keys of " + n
                    + " languages; counters " + n * adds + ", " + Shoal.backend() + ")");
        }
    }

    public static void main(String[] args) {
        if (args.length != 6) {
            System.err.println("usage: Worker STORE LANG LANGS KEYS ADDS VECTORS");
            System.exit(2);
        }
        try {
            run(args);
        } catch (Throwable t) {
            System.err.println("matrix " + args[1] + ": FAILED: " + t);
            System.exit(1);
        }
    }
}
