package io.shoal;

/**
 * A process of {@link MultiProcessTest}: increments the keys of a shared map and a shared
 * cell, and after each acknowledged iteration records how many it completed.
 *
 * <p>Arguments: store name, worker id, iterations (-1: until killed), keys.
 * Iteration j adds 1 to key "k(j % keys)" (by merge, compute or addAndGet in turn), then 1
 * to the cell "total" (updateAndGet or addAndGet in turn), then sets "acks"[id] = j + 1.
 * So if the process dies, the map and the cell hold each of its first acks iterations
 * exactly once, plus possibly the one in flight.
 */
public final class CounterWorker {
    private CounterWorker() {}

    public static void main(String[] args) throws Exception {
        String storeName = args[0];
        String id = args[1];
        long iterations = Long.parseLong(args[2]);
        int keys = Integer.parseInt(args[3]);
        try (ShoalStore store = Shoal.open(storeName, Options.defaults().openMode(OpenMode.OPEN_EXISTING))) {
            ShoalMap<String, Long> counts = store.map("counts", Codecs.STRING, Codecs.LONG);
            ShoalMap<String, Long> acks = store.map("acks", Codecs.STRING, Codecs.LONG);
            ShoalCell<Long> total = store.cell("total", Codecs.LONG, 0L);
            // Start together: every worker waits until all have arrived (bounded).
            int workers = Integer.parseInt(args[4]);
            acks.addAndGet("ready", 1);
            long deadline = System.nanoTime() + 120_000_000_000L;
            while (acks.get("ready") < workers) {
                if (System.nanoTime() > deadline) {
                    System.err.println("worker " + id + ": the others did not arrive in 120 s");
                    System.exit(3);
                }
                Thread.sleep(1);
            }
            for (long j = 0; iterations < 0 || j < iterations; j++) {
                String k = "k" + (j % keys);
                switch ((int) (j % 3)) {
                    case 0: counts.merge(k, 1L, Long::sum); break;
                    case 1: counts.compute(k, (kk, v) -> v == null ? 1L : v + 1); break;
                    default: counts.addAndGet(k, 1);
                }
                if (j % 2 == 0) {
                    total.updateAndGet(x -> x + 1);
                } else {
                    total.addAndGet(1);
                }
                acks.set(id, j + 1);
            }
        }
        System.out.println("worker " + id + " done");
    }
}
