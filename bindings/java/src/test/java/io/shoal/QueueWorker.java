package io.shoal;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * A process of {@link QueueMultiProcessTest}.
 *
 * <p>{@code relay STORE ROUNDS}: takes ROUNDS elements from queue "a2b" of set "pp" (each
 * waiting up to 60 s), adds 1,000,000 to the little-endian long at its start, and pushes it
 * to "b2a".
 *
 * <p>{@code hold STORE}: pulls 3 elements from "work" of set "kr" and 2 from "work" of set
 * "kf", writes "victim" at byte 8 of each, records their indexes in map "held" (keys "kr"
 * and "kf", values the indexes joined by commas), then sleeps until it is killed.
 */
public final class QueueWorker {
    private QueueWorker() {}

    public static void main(String[] args) throws Exception {
        try (ShoalStore store = Shoal.open(args[1], Options.defaults().openMode(OpenMode.OPEN_EXISTING))) {
            if (args[0].equals("relay")) {
                relay(store, Long.parseLong(args[2]));
            } else {
                hold(store);
            }
        }
    }

    private static void relay(ShoalStore store, long rounds) {
        try (ShoalQueueSet qs = store.queueSet("pp")) {
            int a2b = qs.queue("a2b"), b2a = qs.queue("b2a");
            for (long i = 0; i < rounds; i++) {
                Element e = qs.pull(a2b, Duration.ofSeconds(60));
                if (e == null) {
                    System.err.println("relay: nothing came in 60 s at round " + i);
                    System.exit(3);
                }
                ByteBuffer b = e.buffer().order(ByteOrder.LITTLE_ENDIAN);
                b.putLong(0, b.getLong(0) + 1_000_000);
                qs.push(b2a, e);
            }
        }
        System.out.println("relay done");
    }

    private static String take(ShoalStore store, String set, int n) {
        // Not closed: the elements must stay held until the process is killed.
        ShoalQueueSet qs = store.queueSet(set);
        List<Element> es = qs.pullMany(qs.queue("work"), n);
        if (es.size() != n) {
            System.err.println("hold: " + set + " gave " + es.size() + " elements, not " + n);
            System.exit(3);
        }
        List<String> idx = new ArrayList<>();
        for (Element e : es) {
            e.buffer().put(8, "victim".getBytes(StandardCharsets.US_ASCII));
            idx.add(Long.toString(e.index()));
        }
        HELD.addAll(es); // reachable until the end: nothing goes back by garbage collection
        return String.join(",", idx);
    }

    private static final List<Element> HELD = new ArrayList<>();

    private static void hold(ShoalStore store) throws InterruptedException {
        ShoalMap<String, String> held = store.map("held", Codecs.STRING, Codecs.STRING);
        String kr = take(store, "kr", 3);
        String kf = take(store, "kf", 2);
        held.put("kf", kf);
        held.put("kr", kr); // last: the test waits for this key
        System.out.println("holding kr " + kr + " kf " + kf);
        for (;;) {
            Thread.sleep(1000);
        }
    }
}
