package io.shoal.internal;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BOOLEAN;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The Foreign Function &amp; Memory backend (Java 22+): downcalls straight into
 * libshoal_ffi.so, no C shim. Handles (opaque C pointers) cross as longs, which the
 * 64-bit calling conventions pass exactly like pointers, so that no MemorySegment is made
 * per call. Keys and values are copied into per-thread native scratch buffers rather than
 * passed as pinned heap arrays ({@code Linker.Option.critical}): a call may wait on a lock
 * held by a stopped process, and a critical call would hold this JVM's safepoints (and so
 * its garbage collector) for that long. Internal: not part of the API.
 */
final class FfmNative implements NativeApi {
    private static final Linker LINKER = Linker.nativeLinker();
    private static final SymbolLookup LIB =
            SymbolLookup.libraryLookup(NativeLoader.locate(NativeLoader.LIBSHOAL), Arena.global());

    private static final MemoryLayout J = JAVA_LONG;
    private static final MemoryLayout I = JAVA_INT;
    private static final MemoryLayout A = ADDRESS;

    // Each handle sits in a holder class of its own, linked on first use: linking all of
    // them up front took about half a second of a JVM's first open. A static final field
    // of a holder is still a constant to the JIT.
    private static MethodHandle mh(String name, MemoryLayout ret, MemoryLayout... args) {
        MemorySegment sym = LIB.find(name).orElseThrow(() -> new UnsatisfiedLinkError(name + " not in libshoal_ffi.so"));
        FunctionDescriptor fd = ret == null ? FunctionDescriptor.ofVoid(args) : FunctionDescriptor.of(ret, args);
        return LINKER.downcallHandle(sym, fd);
    }

    private static final class VERSION {
        static final MethodHandle H = mh("shoal_version", A);
    }
    private static final class LAST_ERROR {
        static final MethodHandle H = mh("shoal_last_error_message", A);
    }
    private static final class STORE_OPEN {
        static final MethodHandle H = mh("shoal_store_open", I, A, A, A);
    }
    private static final class STORE_CLOSE {
        static final MethodHandle H = mh("shoal_store_close", I, J);
    }
    private static final class STORE_PATH {
        static final MethodHandle H = mh("shoal_store_path", I, J, A, J, A);
    }
    private static final class STORE_MAPS {
        static final MethodHandle H = mh("shoal_store_maps", I, J, A, A);
    }
    private static final class STORE_DROP_MAP {
        static final MethodHandle H = mh("shoal_store_drop_map", I, J, A);
    }
    private static final class STORE_FLUSH {
        static final MethodHandle H = mh("shoal_store_flush", I, J);
    }
    private static final class STORE_DESTROY {
        static final MethodHandle H = mh("shoal_store_destroy", I, A);
    }
    private static final class MAP_KIND {
        static final MethodHandle H = mh("shoal_map_kind", I, J, A, A, A, A);
    }
    private static final class MAP_OPEN {
        static final MethodHandle H = mh("shoal_map_open", I, J, A, I, A, A);
    }
    private static final class MAP_WITH_TIMEOUT {
        static final MethodHandle H = mh("shoal_map_with_timeout", I, J, I, A);
    }
    private static final class MAP_CLOSE {
        static final MethodHandle H = mh("shoal_map_close", I, J);
    }
    private static final class MAP_GET {
        static final MethodHandle H = mh("shoal_map_get", I, J, A, J, A, J, A);
    }
    private static final class MAP_PUT {
        static final MethodHandle H = mh("shoal_map_put", I, J, A, J, A, J, A);
    }
    private static final class MAP_PUT_IF_ABSENT {
        static final MethodHandle H = mh("shoal_map_put_if_absent", I, J, A, J, A, J);
    }
    private static final class MAP_PUT_IF_PRESENT {
        static final MethodHandle H = mh("shoal_map_put_if_present", I, J, A, J, A, J);
    }
    private static final class MAP_CAS {
        static final MethodHandle H = mh("shoal_map_compare_and_swap", I, J, A, J, A, J, A, J, I);
    }
    private static final class MAP_REMOVE {
        static final MethodHandle H = mh("shoal_map_remove", I, J, A, J, A, J, A);
    }
    private static final class MAP_CONTAINS {
        static final MethodHandle H = mh("shoal_map_contains", I, J, A, J, A);
    }
    private static final class MAP_ADD {
        static final MethodHandle H = mh("shoal_map_add", I, J, A, J, J, A);
    }
    private static final class MAP_LEN {
        static final MethodHandle H = mh("shoal_map_len", I, J, A);
    }
    private static final class MAP_CLEAR {
        static final MethodHandle H = mh("shoal_map_clear", I, J);
    }
    private static final class MAP_GET_MANY {
        static final MethodHandle H = mh("shoal_map_get_many", I, J, A, J, A, A);
    }
    private static final class MAP_PUT_MANY {
        static final MethodHandle H = mh("shoal_map_put_many", I, J, A, J);
    }
    private static final class MAP_REMOVE_MANY {
        static final MethodHandle H = mh("shoal_map_remove_many", I, J, A, J, A);
    }
    private static final class MAP_UID {
        static final MethodHandle H = mh("shoal_map_uid", I, J, A, J, A);
    }
    private static final class MAP_PUT_UID {
        static final MethodHandle H = mh("shoal_map_put_uid", I, J, A, J, A, J, A, A);
    }
    private static final class MAP_GET_BY_UID {
        static final MethodHandle H = mh("shoal_map_get_by_uid", I, J, J, A, J, A);
    }
    private static final class MAP_KEY_BY_UID {
        static final MethodHandle H = mh("shoal_map_key_by_uid", I, J, J, A, J, A);
    }
    private static final class ITER_OPEN {
        static final MethodHandle H = mh("shoal_iter_open", I, J, I, A);
    }
    private static final class ITER_NEXT {
        static final MethodHandle H = mh("shoal_iter_next", I, J, A, J, A, A, J, A);
    }
    private static final class ITER_CLOSE {
        static final MethodHandle H = mh("shoal_iter_close", I, J);
    }
    private static final class FIXED_OPEN {
        static final MethodHandle H = mh("shoal_fixed_open_with", I, J, A, J, J, I, A, A);
    }
    private static final class MAP_TYPES {
        static final MethodHandle H = mh("shoal_map_types", I, J, A, A, A, A);
    }
    private static final class FIXED_TYPES {
        static final MethodHandle H = mh("shoal_fixed_types", I, J, A, A, A, A);
    }
    private static final class FIXED_WITH_TIMEOUT {
        static final MethodHandle H = mh("shoal_fixed_with_timeout", I, J, I, A);
    }
    private static final class FIXED_CLOSE {
        static final MethodHandle H = mh("shoal_fixed_close", I, J);
    }
    private static final class FIXED_GET {
        static final MethodHandle H = mh("shoal_fixed_get", I, J, A, J, A, J);
    }
    private static final class FIXED_PUT {
        static final MethodHandle H = mh("shoal_fixed_put", I, J, A, J, A, J, A);
    }
    private static final class FIXED_PUT_IF_ABSENT {
        static final MethodHandle H = mh("shoal_fixed_put_if_absent", I, J, A, J, A, J);
    }
    private static final class FIXED_PUT_IF_PRESENT {
        static final MethodHandle H = mh("shoal_fixed_put_if_present", I, J, A, J, A, J);
    }
    private static final class FIXED_CAS {
        static final MethodHandle H = mh("shoal_fixed_compare_and_swap", I, J, A, J, A, J, A, J, I);
    }
    private static final class FIXED_REMOVE {
        static final MethodHandle H = mh("shoal_fixed_remove", I, J, A, J);
    }
    private static final class FIXED_CONTAINS {
        static final MethodHandle H = mh("shoal_fixed_contains", I, J, A, J, A);
    }
    private static final class FIXED_ADD {
        static final MethodHandle H = mh("shoal_fixed_add", I, J, A, J, J, A);
    }
    private static final class FIXED_LEN {
        static final MethodHandle H = mh("shoal_fixed_len", I, J, A);
    }
    private static final class FIXED_CLEAR {
        static final MethodHandle H = mh("shoal_fixed_clear", I, J);
    }
    private static final class FIXED_GET_MANY {
        static final MethodHandle H = mh("shoal_fixed_get_many", I, J, A, J, A, A);
    }
    private static final class FIXED_PUT_MANY {
        static final MethodHandle H = mh("shoal_fixed_put_many", I, J, A, J);
    }
    private static final class FIXED_REMOVE_MANY {
        static final MethodHandle H = mh("shoal_fixed_remove_many", I, J, A, J, A);
    }
    private static final class FIXED_ITER_OPEN {
        static final MethodHandle H = mh("shoal_fixed_iter_open", I, J, A);
    }
    private static final class FIXED_ITER_NEXT {
        static final MethodHandle H = mh("shoal_fixed_iter_next", I, J, A, J, A, J);
    }
    private static final class FIXED_ITER_CLOSE {
        static final MethodHandle H = mh("shoal_fixed_iter_close", I, J);
    }
    private static final class QUEUE_OPEN {
        static final MethodHandle H = mh("shoal_queue_open", I, J, A, A, A);
    }
    private static final class QUEUE_CLOSE {
        static final MethodHandle H = mh("shoal_queue_close", I, J);
    }
    private static final class QUEUE_INDEX {
        static final MethodHandle H = mh("shoal_queue_index", I, J, A, A);
    }
    private static final class QUEUE_PULL {
        static final MethodHandle H = mh("shoal_queue_pull", I, J, I, J, A);
    }
    private static final class QUEUE_PULL_MANY {
        static final MethodHandle H = mh("shoal_queue_pull_many", I, J, I, A, J, A);
    }
    private static final class QUEUE_PUSH {
        static final MethodHandle H = mh("shoal_queue_push", I, J, I, A);
    }
    private static final class QUEUE_PUSH_MANY {
        static final MethodHandle H = mh("shoal_queue_push_many", I, J, I, A, J);
    }
    private static final class QUEUE_RELEASE {
        static final MethodHandle H = mh("shoal_queue_release", I, J, A);
    }
    private static final class QUEUE_MOVE {
        static final MethodHandle H = mh("shoal_queue_move", I, J, I, I, J, A);
    }
    private static final class QUEUE_LEN {
        static final MethodHandle H = mh("shoal_queue_len", I, J, I, A);
    }
    private static final class QUEUE_RECLAIM {
        static final MethodHandle H = mh("shoal_queue_reclaim", I, J, A);
    }
    private static final class QUEUE_PULL_ANY {
        static final MethodHandle H = mh("shoal_queue_pull_any", I, J, A, J, J, A);
    }
    private static final class QUEUE_INFO {
        static final MethodHandle H = mh("shoal_queue_get_info", I, J, A);
    }
    private static final class QUEUE_NAME {
        static final MethodHandle H = mh("shoal_queue_name", I, J, I, A, J, A);
    }
    private static final class QUEUE_STATS {
        static final MethodHandle H = mh("shoal_queue_get_stats", I, J, I, A);
    }
    private static final class QUEUE_HOLDERS {
        static final MethodHandle H = mh("shoal_queue_holders", I, J, A, J, A);
    }

    // Callbacks: one upcall stub each for the life of the process. They run on the calling
    // thread, synchronously, so they hand their results over through a thread-local.
    private static final class Upcalls {
        static final MemorySegment MANY_CB;
        static final MemorySegment TEXT_CB;

        static {
            try {
                MethodHandles.Lookup l = MethodHandles.lookup();
                MANY_CB = LINKER.upcallStub(
                        l.findStatic(FfmNative.class, "manyCb",
                                MethodType.methodType(void.class, MemorySegment.class, long.class,
                                        MemorySegment.class, long.class, boolean.class)),
                        FunctionDescriptor.ofVoid(A, J, A, J, JAVA_BOOLEAN), Arena.global());
                TEXT_CB = LINKER.upcallStub(
                        l.findStatic(FfmNative.class, "textCb",
                                MethodType.methodType(int.class, MemorySegment.class, MemorySegment.class, long.class)),
                        FunctionDescriptor.of(I, A, A, J), Arena.global());
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }
    }

    /** Per-thread native buffers: keys and values are copied into them for each call. */
    private static final class Scratch {
        private final Arena arena = Arena.ofAuto();
        MemorySegment a = arena.allocate(512, 16);
        MemorySegment b = arena.allocate(512, 16);
        MemorySegment c = arena.allocate(512, 16);
        MemorySegment out = arena.allocate(1024, 16);
        MemorySegment out2 = arena.allocate(1024, 16);
        final MemorySegment w = arena.allocate(64, 16); // out-parameters, 8 bytes each
        byte[][] many;
        List<String> texts;

        MemorySegment put(int which, byte[] bytes) {
            MemorySegment s = which == 0 ? a : which == 1 ? b : c;
            if (s.byteSize() < bytes.length) {
                s = Arena.ofAuto().allocate(Math.max(bytes.length, s.byteSize() * 2), 16);
                if (which == 0) {
                    a = s;
                } else if (which == 1) {
                    b = s;
                } else {
                    c = s;
                }
            }
            MemorySegment.copy(bytes, 0, s, JAVA_BYTE, 0, bytes.length);
            return s;
        }

        MemorySegment out(long size) {
            if (out.byteSize() < size) {
                out = Arena.ofAuto().allocate(Math.max(size, out.byteSize() * 2), 16);
            }
            return out;
        }

        MemorySegment out2(long size) {
            if (out2.byteSize() < size) {
                out2 = Arena.ofAuto().allocate(Math.max(size, out2.byteSize() * 2), 16);
            }
            return out2;
        }
    }

    private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

    private FfmNative() {}

    static NativeApi load() {
        return new FfmNative();
    }

    private static RuntimeException fail(int st) {
        String msg;
        try {
            MemorySegment m = (MemorySegment) LAST_ERROR.H.invokeExact();
            msg = m.reinterpret(Long.MAX_VALUE).getString(0, StandardCharsets.UTF_8);
        } catch (Throwable t) {
            msg = "";
        }
        return Status.exception(st, msg);
    }

    /** Throws the error of a call that did not return OK. */
    private static void check(int st) {
        if (st != Status.OK) {
            throw fail(st);
        }
    }

    /** The long a call that returned OK wrote at {@code out}. */
    private static long outLong(int st, MemorySegment out) {
        check(st);
        return out.get(JAVA_LONG, 0);
    }

    /** The boolean (a byte) a call that returned OK wrote at {@code out}. */
    private static boolean outBool(int st, MemorySegment out) {
        check(st);
        return out.get(JAVA_BYTE, 0) != 0;
    }

    /** OK: true; NOT_FOUND: false; any other status is the call's error. */
    private static boolean found(int st) {
        if (st == Status.OK) {
            return true;
        }
        if (st == Status.NOT_FOUND) {
            return false;
        }
        throw fail(st);
    }

    private static RuntimeException wrap(Throwable t) {
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new IllegalStateException(t);
    }

    private static MemorySegment cstr(Arena arena, String s) {
        return arena.allocateFrom(s, StandardCharsets.UTF_8);
    }

    private static byte[] bytes(MemorySegment s, long n) {
        byte[] r = new byte[(int) n];
        MemorySegment.copy(s, JAVA_BYTE, 0, r, 0, (int) n);
        return r;
    }

    private static long checkLen(long n) {
        if (n > Integer.MAX_VALUE - 8) {
            throw Status.exception(Status.INVALID, "a value of " + n + " bytes does not fit a Java array");
        }
        return n;
    }

    @Override
    public String backend() {
        return "ffm";
    }

    @Override
    public String version() {
        try {
            MemorySegment m = (MemorySegment) VERSION.H.invokeExact();
            return m.reinterpret(Long.MAX_VALUE).getString(0, StandardCharsets.UTF_8);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    // ---- store -------------------------------------------------------------------------

    @Override
    public long storeOpen(String path, long[] o) {
        try (Arena arena = Arena.ofConfined()) {
            // shoal_options: size_t struct_size; u32 open_mode, file_mode; u64 max_size,
            // initial_size, chunk_size; u32 lock_timeout_ms, max_processes, max_threads,
            // max_maps, checksums, sync_writes, pretouch, reserved.
            MemorySegment opts = arena.allocate(72, 8);
            opts.set(JAVA_LONG, 0, 72);
            opts.set(JAVA_INT, 8, (int) o[OPT_OPEN_MODE]);
            opts.set(JAVA_INT, 12, (int) o[OPT_FILE_MODE]);
            opts.set(JAVA_LONG, 16, o[OPT_MAX_SIZE]);
            opts.set(JAVA_LONG, 24, o[OPT_INITIAL_SIZE]);
            opts.set(JAVA_LONG, 32, o[OPT_CHUNK_SIZE]);
            opts.set(JAVA_INT, 40, (int) o[OPT_LOCK_TIMEOUT_MS]);
            opts.set(JAVA_INT, 44, (int) o[OPT_MAX_PROCESSES]);
            opts.set(JAVA_INT, 48, (int) o[OPT_MAX_THREADS]);
            opts.set(JAVA_INT, 52, (int) o[OPT_MAX_MAPS]);
            opts.set(JAVA_INT, 56, (int) o[OPT_CHECKSUMS]);
            opts.set(JAVA_INT, 60, (int) o[OPT_SYNC_WRITES]);
            opts.set(JAVA_INT, 64, (int) o[OPT_PRETOUCH]);
            MemorySegment out = arena.allocate(J);
            return outLong((int) STORE_OPEN.H.invokeExact(cstr(arena, path), opts, out), out);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public void storeClose(long store) {
        try {
            int st = (int) STORE_CLOSE.H.invokeExact(store);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public String storePath(long store) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment len = arena.allocate(J);
            int st = (int) STORE_PATH.H.invokeExact(store, MemorySegment.NULL, 0L, len);
            if (st != Status.BUFFER_TOO_SMALL && st != Status.OK) {
                throw fail(st);
            }
            long n = len.get(JAVA_LONG, 0);
            MemorySegment buf = arena.allocate(n + 1);
            st = (int) STORE_PATH.H.invokeExact(store, buf, n + 1, len);
            if (st != Status.OK) {
                throw fail(st);
            }
            return new String(bytes(buf, len.get(JAVA_LONG, 0)), StandardCharsets.UTF_8);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    private static int textCb(MemorySegment ctx, MemorySegment text, long len) {
        try {
            SCRATCH.get().texts.add(new String(bytes(text.reinterpret(len), len), StandardCharsets.UTF_8));
            return 0;
        } catch (Throwable t) {
            // Nothing may unwind into C: stop the walk instead.
            return 1;
        }
    }

    @Override
    public List<String> storeMaps(long store) {
        Scratch s = SCRATCH.get();
        s.texts = new ArrayList<>();
        try {
            check((int) STORE_MAPS.H.invokeExact(store, Upcalls.TEXT_CB, MemorySegment.NULL));
            return s.texts;
        } catch (Throwable t) {
            throw wrap(t);
        } finally {
            s.texts = null;
        }
    }

    @Override
    public void storeDropMap(long store, String name) {
        try (Arena arena = Arena.ofConfined()) {
            check((int) STORE_DROP_MAP.H.invokeExact(store, cstr(arena, name)));
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public void storeFlush(long store) {
        try {
            check((int) STORE_FLUSH.H.invokeExact(store));
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public void storeDestroy(String path) {
        try (Arena arena = Arena.ofConfined()) {
            check((int) STORE_DESTROY.H.invokeExact(cstr(arena, path)));
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public long[] mapKind(long store, String name) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment w = arena.allocate(24, 8);
            int st = (int) MAP_KIND.H.invokeExact(store, cstr(arena, name), w, w.asSlice(8), w.asSlice(16));
            if (st == Status.NOT_FOUND) {
                return null;
            }
            if (st != Status.OK) {
                throw fail(st);
            }
            return new long[] {w.get(JAVA_INT, 0) & 0xffffffffL, w.get(JAVA_LONG, 8), w.get(JAVA_LONG, 16)};
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    /** shoal_map_types or shoal_fixed_types through {@code h}, into {kcode, ktag, vcode, vtag}. */
    private static long[] types(MethodHandle h, long map) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment w = arena.allocate(32, 8);
            int st = (int) h.invokeExact(map, w, w.asSlice(8), w.asSlice(16), w.asSlice(24));
            if (st != Status.OK) {
                throw fail(st);
            }
            return new long[] {w.get(JAVA_INT, 0) & 0xffffffffL, w.get(JAVA_LONG, 8),
                    w.get(JAVA_INT, 16) & 0xffffffffL, w.get(JAVA_LONG, 24)};
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public long[] mapTypes(long map) {
        return types(MAP_TYPES.H, map);
    }

    @Override
    public long[] fixedTypes(long fixed) {
        return types(FIXED_TYPES.H, fixed);
    }

    // ---- variable-size maps -----------------------------------------------------------

    @Override
    public long mapOpen(long store, String name, boolean create, boolean uids, long[] types) {
        try (Arena arena = Arena.ofConfined()) {
            // shoal_map_options: size_t struct_size; u32 segment_buckets, stash_buckets, uids,
            // reserved, key_type, value_type; u64 key_tag, value_tag.
            MemorySegment o = arena.allocate(48, 8);
            o.set(JAVA_LONG, 0, 48);
            o.set(JAVA_INT, 16, uids ? 1 : 0);
            if (types != null) {
                o.set(JAVA_INT, 24, (int) types[0]);
                o.set(JAVA_INT, 28, (int) types[2]);
                o.set(JAVA_LONG, 32, types[1]);
                o.set(JAVA_LONG, 40, types[3]);
            }
            MemorySegment out = arena.allocate(J);
            return outLong((int) MAP_OPEN.H.invokeExact(store, cstr(arena, name), create ? 1 : 0, o, out), out);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public long mapWithTimeout(long map, int timeoutMs) {
        MemorySegment w = SCRATCH.get().w;
        try {
            return outLong((int) MAP_WITH_TIMEOUT.H.invokeExact(map, timeoutMs, w), w);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public void mapClose(long map) {
        try {
            int st = (int) MAP_CLOSE.H.invokeExact(map);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public byte[] mapGet(long map, byte[] key) {
        Scratch s = SCRATCH.get();
        try {
            MemorySegment k = s.put(0, key);
            MemorySegment out = s.out;
            for (;;) {
                int st = (int) MAP_GET.H.invokeExact(map, k, (long) key.length, out, out.byteSize(), s.w);
                if (st == Status.OK) {
                    return bytes(out, s.w.get(JAVA_LONG, 0));
                }
                if (st == Status.NOT_FOUND) {
                    return null;
                }
                if (st != Status.BUFFER_TOO_SMALL) {
                    throw fail(st);
                }
                // The value may grow again meanwhile: loop, as the C API says.
                out = s.out(checkLen(s.w.get(JAVA_LONG, 0)));
            }
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public boolean mapPut(long map, byte[] key, byte[] value) {
        Scratch s = SCRATCH.get();
        try {
            return outBool((int) MAP_PUT.H.invokeExact(map, s.put(0, key), (long) key.length, s.put(1, value),
                    (long) value.length, s.w), s.w);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public boolean mapPutIfAbsent(long map, byte[] key, byte[] value) {
        Scratch s = SCRATCH.get();
        try {
            int st = (int) MAP_PUT_IF_ABSENT.H.invokeExact(map, s.put(0, key), (long) key.length, s.put(1, value),
                    (long) value.length);
            if (st == Status.OK) {
                return true;
            }
            if (st == Status.EXISTS) {
                return false;
            }
            throw fail(st);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public boolean mapPutIfPresent(long map, byte[] key, byte[] value) {
        Scratch s = SCRATCH.get();
        try {
            return found((int) MAP_PUT_IF_PRESENT.H.invokeExact(map, s.put(0, key), (long) key.length, s.put(1, value),
                    (long) value.length));
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    private static final int CAS_EXPECT_ABSENT = 1;
    private static final int CAS_REMOVE = 2;

    private static boolean cas(MethodHandle mh, long h, byte[] key, byte[] expected, byte[] update) {
        Scratch s = SCRATCH.get();
        try {
            MemorySegment e = expected == null ? MemorySegment.NULL : s.put(1, expected);
            MemorySegment n = update == null ? MemorySegment.NULL : s.put(2, update);
            int flags = (expected == null ? CAS_EXPECT_ABSENT : 0) | (update == null ? CAS_REMOVE : 0);
            int st = (int) mh.invokeExact(h, s.put(0, key), (long) key.length, e,
                    expected == null ? 0L : (long) expected.length, n, update == null ? 0L : (long) update.length,
                    flags);
            if (st == Status.OK) {
                return true;
            }
            if (st == Status.MISMATCH) {
                return false;
            }
            throw fail(st);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public boolean mapCas(long map, byte[] key, byte[] expected, byte[] update) {
        return cas(MAP_CAS.H, map, key, expected, update);
    }

    @Override
    public boolean mapRemove(long map, byte[] key) {
        Scratch s = SCRATCH.get();
        try {
            return found((int) MAP_REMOVE.H.invokeExact(map, s.put(0, key), (long) key.length, MemorySegment.NULL, 0L,
                    MemorySegment.NULL));
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public boolean mapContains(long map, byte[] key) {
        Scratch s = SCRATCH.get();
        try {
            return outBool((int) MAP_CONTAINS.H.invokeExact(map, s.put(0, key), (long) key.length, s.w), s.w);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public long mapAdd(long map, byte[] key, long delta) {
        Scratch s = SCRATCH.get();
        try {
            return outLong((int) MAP_ADD.H.invokeExact(map, s.put(0, key), (long) key.length, delta, s.w), s.w);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public long mapLen(long map) {
        Scratch s = SCRATCH.get();
        try {
            return outLong((int) MAP_LEN.H.invokeExact(map, s.w), s.w);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public void mapClear(long map) {
        try {
            check((int) MAP_CLEAR.H.invokeExact(map));
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    private static void manyCb(MemorySegment ctx, long index, MemorySegment value, long len, boolean present) {
        try {
            if (present) {
                SCRATCH.get().many[(int) index] = bytes(value.reinterpret(len), checkLen(len));
            }
        } catch (Throwable t) {
            // Nothing may unwind into C; getMany sees the missing value as absent only if
            // this failed, which only an OutOfMemoryError could make it do.
        }
    }

    /** An array of shoal_bytes {data, len} for keys, in arena. */
    private static MemorySegment byteStructs(Arena arena, byte[][] keys) {
        MemorySegment arr = arena.allocate(16L * Math.max(1, keys.length), 8);
        for (int i = 0; i < keys.length; i++) {
            byte[] k = keys[i];
            if (k == null) {
                throw new NullPointerException("key " + i);
            }
            MemorySegment d = arena.allocate(Math.max(1, k.length));
            MemorySegment.copy(k, 0, d, JAVA_BYTE, 0, k.length);
            arr.set(ADDRESS, 16L * i, d);
            arr.set(JAVA_LONG, 16L * i + 8, k.length);
        }
        return arr;
    }

    private static byte[][] getMany(MethodHandle mh, long h, byte[][] keys) {
        Scratch s = SCRATCH.get();
        byte[][] out = new byte[keys.length][];
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment arr = byteStructs(arena, keys);
            s.many = out;
            int st = (int) mh.invokeExact(h, arr, (long) keys.length, Upcalls.MANY_CB, MemorySegment.NULL);
            if (st != Status.OK) {
                throw fail(st);
            }
            return out;
        } catch (Throwable t) {
            throw wrap(t);
        } finally {
            s.many = null;
        }
    }

    @Override
    public byte[][] mapGetMany(long map, byte[][] keys) {
        return getMany(MAP_GET_MANY.H, map, keys);
    }

    private static void putMany(MethodHandle mh, long h, byte[][] keys, byte[][] values) {
        if (keys.length != values.length) {
            throw Status.exception(Status.INVALID, "keys and values differ in number");
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ks = byteStructs(arena, keys);
            MemorySegment vs = byteStructs(arena, values);
            MemorySegment kv = arena.allocate(32L * Math.max(1, keys.length), 8);
            for (int i = 0; i < keys.length; i++) {
                kv.set(ADDRESS, 32L * i, ks.get(ADDRESS, 16L * i));
                kv.set(JAVA_LONG, 32L * i + 8, keys[i].length);
                kv.set(ADDRESS, 32L * i + 16, vs.get(ADDRESS, 16L * i));
                kv.set(JAVA_LONG, 32L * i + 24, values[i].length);
            }
            int st = (int) mh.invokeExact(h, kv, (long) keys.length);
            if (st != Status.OK) {
                throw fail(st);
            }
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public void mapPutMany(long map, byte[][] keys, byte[][] values) {
        putMany(MAP_PUT_MANY.H, map, keys, values);
    }

    private static long removeMany(MethodHandle mh, long h, byte[][] keys) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment arr = byteStructs(arena, keys);
            MemorySegment removed = arena.allocate(J);
            int st = (int) mh.invokeExact(h, arr, (long) keys.length, removed);
            if (st != Status.OK) {
                throw fail(st);
            }
            return removed.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public long mapRemoveMany(long map, byte[][] keys) {
        return removeMany(MAP_REMOVE_MANY.H, map, keys);
    }

    // ---- UIDs --------------------------------------------------------------------------

    @Override
    public long mapUid(long map, byte[] key) {
        Scratch s = SCRATCH.get();
        try {
            int st = (int) MAP_UID.H.invokeExact(map, s.put(0, key), (long) key.length, s.w);
            if (st == Status.NOT_FOUND) {
                return 0;
            }
            if (st != Status.OK) {
                throw fail(st);
            }
            return s.w.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public long mapPutUid(long map, byte[] key, byte[] value) {
        Scratch s = SCRATCH.get();
        try {
            return outLong((int) MAP_PUT_UID.H.invokeExact(map, s.put(0, key), (long) key.length, s.put(1, value),
                    (long) value.length, s.w, MemorySegment.NULL), s.w);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    private static byte[] byUid(MethodHandle mh, long map, long uid) {
        Scratch s = SCRATCH.get();
        try {
            MemorySegment out = s.out;
            for (;;) {
                int st = (int) mh.invokeExact(map, uid, out, out.byteSize(), s.w);
                if (st == Status.OK) {
                    return bytes(out, s.w.get(JAVA_LONG, 0));
                }
                if (st != Status.BUFFER_TOO_SMALL) {
                    throw fail(st);
                }
                out = s.out(checkLen(s.w.get(JAVA_LONG, 0)));
            }
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public byte[] mapGetByUid(long map, long uid) {
        return byUid(MAP_GET_BY_UID.H, map, uid);
    }

    @Override
    public byte[] mapKeyByUid(long map, long uid) {
        return byUid(MAP_KEY_BY_UID.H, map, uid);
    }

    // ---- iteration ---------------------------------------------------------------------

    @Override
    public long iterOpen(long map) {
        MemorySegment w = SCRATCH.get().w;
        try {
            return outLong((int) ITER_OPEN.H.invokeExact(map, 0, w), w);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public byte[][] iterNext(long iter) {
        Scratch s = SCRATCH.get();
        try {
            MemorySegment kb = s.out2;
            MemorySegment vb = s.out;
            MemorySegment kl = s.w;
            MemorySegment vl = s.w.asSlice(8);
            for (;;) {
                int st = (int) ITER_NEXT.H.invokeExact(iter, kb, kb.byteSize(), kl, vb, vb.byteSize(), vl);
                if (st == Status.OK) {
                    return new byte[][] {bytes(kb, kl.get(JAVA_LONG, 0)), bytes(vb, vl.get(JAVA_LONG, 0))};
                }
                if (st == Status.DONE) {
                    return null;
                }
                if (st != Status.BUFFER_TOO_SMALL) {
                    throw fail(st);
                }
                kb = s.out2(kl.get(JAVA_LONG, 0));
                vb = s.out(checkLen(vl.get(JAVA_LONG, 0)));
            }
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public void iterClose(long iter) {
        try {
            int st = (int) ITER_CLOSE.H.invokeExact(iter);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    // ---- fixed-size maps ---------------------------------------------------------------

    @Override
    public long fixedOpen(long store, String name, int keySize, int valueSize, boolean create, long[] types) {
        try (Arena arena = Arena.ofConfined()) {
            // shoal_fixed_options: size_t struct_size; u32 segment_buckets, stash_buckets,
            // key_type, value_type; u64 key_tag, value_tag.
            MemorySegment o = arena.allocate(40, 8);
            o.set(JAVA_LONG, 0, 40);
            if (types != null) {
                o.set(JAVA_INT, 16, (int) types[0]);
                o.set(JAVA_INT, 20, (int) types[2]);
                o.set(JAVA_LONG, 24, types[1]);
                o.set(JAVA_LONG, 32, types[3]);
            }
            MemorySegment out = arena.allocate(J);
            return outLong((int) FIXED_OPEN.H.invokeExact(store, cstr(arena, name), (long) keySize, (long) valueSize,
                    create ? 1 : 0, o, out), out);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public long fixedWithTimeout(long fixed, int timeoutMs) {
        MemorySegment w = SCRATCH.get().w;
        try {
            return outLong((int) FIXED_WITH_TIMEOUT.H.invokeExact(fixed, timeoutMs, w), w);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public void fixedClose(long fixed) {
        try {
            int st = (int) FIXED_CLOSE.H.invokeExact(fixed);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public byte[] fixedGet(long fixed, byte[] key, int valueSize) {
        Scratch s = SCRATCH.get();
        try {
            int st = (int) FIXED_GET.H.invokeExact(fixed, s.put(0, key), (long) key.length, s.out, (long) valueSize);
            if (st == Status.OK) {
                return bytes(s.out, valueSize);
            }
            if (st == Status.NOT_FOUND) {
                return null;
            }
            throw fail(st);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public boolean fixedPut(long fixed, byte[] key, byte[] value) {
        Scratch s = SCRATCH.get();
        try {
            return outBool((int) FIXED_PUT.H.invokeExact(fixed, s.put(0, key), (long) key.length, s.put(1, value),
                    (long) value.length, s.w), s.w);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public boolean fixedPutIfAbsent(long fixed, byte[] key, byte[] value) {
        Scratch s = SCRATCH.get();
        try {
            int st = (int) FIXED_PUT_IF_ABSENT.H.invokeExact(fixed, s.put(0, key), (long) key.length, s.put(1, value),
                    (long) value.length);
            if (st == Status.OK) {
                return true;
            }
            if (st == Status.EXISTS) {
                return false;
            }
            throw fail(st);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public boolean fixedPutIfPresent(long fixed, byte[] key, byte[] value) {
        Scratch s = SCRATCH.get();
        try {
            return found((int) FIXED_PUT_IF_PRESENT.H.invokeExact(fixed, s.put(0, key), (long) key.length,
                    s.put(1, value), (long) value.length));
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public boolean fixedCas(long fixed, byte[] key, byte[] expected, byte[] update) {
        return cas(FIXED_CAS.H, fixed, key, expected, update);
    }

    @Override
    public boolean fixedRemove(long fixed, byte[] key) {
        Scratch s = SCRATCH.get();
        try {
            return found((int) FIXED_REMOVE.H.invokeExact(fixed, s.put(0, key), (long) key.length));
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public boolean fixedContains(long fixed, byte[] key) {
        Scratch s = SCRATCH.get();
        try {
            return outBool((int) FIXED_CONTAINS.H.invokeExact(fixed, s.put(0, key), (long) key.length, s.w), s.w);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public long fixedAdd(long fixed, byte[] key, long delta) {
        Scratch s = SCRATCH.get();
        try {
            return outLong((int) FIXED_ADD.H.invokeExact(fixed, s.put(0, key), (long) key.length, delta, s.w), s.w);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public long fixedLen(long fixed) {
        Scratch s = SCRATCH.get();
        try {
            return outLong((int) FIXED_LEN.H.invokeExact(fixed, s.w), s.w);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public void fixedClear(long fixed) {
        try {
            check((int) FIXED_CLEAR.H.invokeExact(fixed));
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public byte[][] fixedGetMany(long fixed, byte[][] keys, int valueSize) {
        return getMany(FIXED_GET_MANY.H, fixed, keys);
    }

    @Override
    public void fixedPutMany(long fixed, byte[][] keys, byte[][] values) {
        putMany(FIXED_PUT_MANY.H, fixed, keys, values);
    }

    @Override
    public long fixedRemoveMany(long fixed, byte[][] keys) {
        return removeMany(FIXED_REMOVE_MANY.H, fixed, keys);
    }

    @Override
    public long fixedIterOpen(long fixed) {
        MemorySegment w = SCRATCH.get().w;
        try {
            return outLong((int) FIXED_ITER_OPEN.H.invokeExact(fixed, w), w);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public byte[][] fixedIterNext(long iter, int keySize, int valueSize) {
        Scratch s = SCRATCH.get();
        try {
            MemorySegment kb = s.out2;
            MemorySegment vb = s.out;
            int st = (int) FIXED_ITER_NEXT.H.invokeExact(iter, kb, (long) keySize, vb, (long) valueSize);
            if (st == Status.OK) {
                return new byte[][] {bytes(kb, keySize), bytes(vb, valueSize)};
            }
            if (st == Status.DONE) {
                return null;
            }
            throw fail(st);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public void fixedIterClose(long iter) {
        try {
            int st = (int) FIXED_ITER_CLOSE.H.invokeExact(iter);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    // ---- queue sets --------------------------------------------------------------------

    // shoal_element: u8 *data; size_t len; u64 index; u32 from, redelivered: 32 bytes.
    private static final long ELEMENT = 32;

    private static void elementOut(MemorySegment s, long off, long[] w, int woff) {
        w[woff + E_DATA] = s.get(JAVA_LONG, off);
        w[woff + E_LEN] = s.get(JAVA_LONG, off + 8);
        w[woff + E_INDEX] = s.get(JAVA_LONG, off + 16);
        w[woff + E_FROM] = Integer.toUnsignedLong(s.get(JAVA_INT, off + 24));
        w[woff + E_REDELIVERED] = s.get(JAVA_INT, off + 28);
    }

    private static void elementIn(long[] w, int woff, MemorySegment s, long off) {
        s.set(JAVA_LONG, off, w[woff + E_DATA]);
        s.set(JAVA_LONG, off + 8, w[woff + E_LEN]);
        s.set(JAVA_LONG, off + 16, w[woff + E_INDEX]);
        s.set(JAVA_INT, off + 24, (int) w[woff + E_FROM]);
        s.set(JAVA_INT, off + 28, (int) w[woff + E_REDELIVERED]);
    }

    @Override
    public long queueOpen(long store, String name, boolean create, long elementSize, long elements, String[] queues,
            long[] limits, String initial, boolean redeliver) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment opts = MemorySegment.NULL;
            if (create) {
                // shoal_queue_options: size_t struct_size, element_size; u64 elements;
                // const char *const *queues; size_t n_queues; const u64 *limits;
                // const char *initial; u32 redeliver (+ 4 bytes of padding).
                int n = queues == null ? 0 : queues.length;
                opts = arena.allocate(64, 8);
                opts.set(JAVA_LONG, 0, 64);
                opts.set(JAVA_LONG, 8, elementSize);
                opts.set(JAVA_LONG, 16, elements);
                if (n > 0) {
                    MemorySegment names = arena.allocate(8L * n, 8);
                    MemorySegment lims = arena.allocate(8L * n, 8);
                    for (int i = 0; i < n; i++) {
                        names.set(ADDRESS, 8L * i, cstr(arena, queues[i]));
                        lims.set(JAVA_LONG, 8L * i, limits == null ? 0 : limits[i]);
                    }
                    opts.set(ADDRESS, 24, names);
                    opts.set(ADDRESS, 40, lims);
                }
                opts.set(JAVA_LONG, 32, n);
                opts.set(ADDRESS, 48, initial == null ? MemorySegment.NULL : cstr(arena, initial));
                opts.set(JAVA_INT, 56, redeliver ? 1 : 0);
            }
            MemorySegment out = arena.allocate(J);
            return outLong((int) QUEUE_OPEN.H.invokeExact(store, cstr(arena, name), opts, out), out);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public void queueClose(long set) {
        try {
            int st = (int) QUEUE_CLOSE.H.invokeExact(set);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public int queueIndex(long set, String name) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(J);
            check((int) QUEUE_INDEX.H.invokeExact(set, cstr(arena, name), out));
            return out.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public boolean queuePull(long set, int q, long timeoutMs, long[] out) {
        MemorySegment w = SCRATCH.get().w;
        try {
            int st = (int) QUEUE_PULL.H.invokeExact(set, q, timeoutMs, w);
            if (st == Status.EMPTY) {
                return false;
            }
            if (st != Status.OK) {
                throw fail(st);
            }
            elementOut(w, 0, out, 0);
            return true;
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public int queuePullMany(long set, int q, int max, long[] out) {
        Scratch s = SCRATCH.get();
        try {
            MemorySegment es = s.out(ELEMENT * max);
            check((int) QUEUE_PULL_MANY.H.invokeExact(set, q, es, (long) max, s.w));
            int got = (int) s.w.get(JAVA_LONG, 0);
            for (int i = 0; i < got; i++) {
                elementOut(es, ELEMENT * i, out, i * E_WORDS);
            }
            return got;
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public void queuePush(long set, int q, long[] e) {
        MemorySegment w = SCRATCH.get().w;
        try {
            elementIn(e, 0, w, 0);
            check((int) QUEUE_PUSH.H.invokeExact(set, q, w));
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public void queuePushMany(long set, int q, long[] elems, int n) {
        Scratch s = SCRATCH.get();
        try {
            MemorySegment es = s.out(ELEMENT * n);
            for (int i = 0; i < n; i++) {
                elementIn(elems, i * E_WORDS, es, ELEMENT * i);
            }
            check((int) QUEUE_PUSH_MANY.H.invokeExact(set, q, es, (long) n));
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public void queueRelease(long set, long[] e) {
        MemorySegment w = SCRATCH.get().w;
        try {
            elementIn(e, 0, w, 0);
            check((int) QUEUE_RELEASE.H.invokeExact(set, w));
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public long queueMove(long set, int from, int to, long max) {
        MemorySegment w = SCRATCH.get().w;
        try {
            return outLong((int) QUEUE_MOVE.H.invokeExact(set, from, to, max, w), w);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public long queueLen(long set, int q) {
        MemorySegment w = SCRATCH.get().w;
        try {
            return outLong((int) QUEUE_LEN.H.invokeExact(set, q, w), w);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public long queueReclaim(long set) {
        MemorySegment w = SCRATCH.get().w;
        try {
            return outLong((int) QUEUE_RECLAIM.H.invokeExact(set, w), w);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public boolean queuePullAny(long set, int[] queues, long timeoutMs, long[] out) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment qs = arena.allocate(4L * Math.max(1, queues.length), 4);
            for (int i = 0; i < queues.length; i++) {
                qs.setAtIndex(JAVA_INT, i, queues[i]);
            }
            MemorySegment e = arena.allocate(ELEMENT, 8);
            int st = (int) QUEUE_PULL_ANY.H.invokeExact(set, qs, (long) queues.length, timeoutMs, e);
            if (st == Status.EMPTY) {
                return false;
            }
            if (st != Status.OK) {
                throw fail(st);
            }
            elementOut(e, 0, out, 0);
            return true;
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    /** A versioned struct of {@code n} u64s after its struct_size, set for the call. */
    private static MemorySegment versioned(Arena arena, int n) {
        MemorySegment out = arena.allocate(8L * (n + 1), 8);
        out.set(JAVA_LONG, 0, 8L * (n + 1));
        return out;
    }

    private static long[] words(MemorySegment out, int n) {
        long[] v = new long[n];
        for (int i = 0; i < n; i++) {
            v[i] = out.get(JAVA_LONG, 8L * (i + 1));
        }
        return v;
    }

    @Override
    public long[] queueInfo(long set) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = versioned(arena, 3);
            check((int) QUEUE_INFO.H.invokeExact(set, out));
            return words(out, 3);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public String queueName(long set, int q) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(128); // queue names are at most 120 bytes
            MemorySegment len = arena.allocate(J);
            check((int) QUEUE_NAME.H.invokeExact(set, q, buf, 128L, len));
            return new String(bytes(buf, len.get(JAVA_LONG, 0)), StandardCharsets.UTF_8);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public long[] queueStats(long set, int q) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = versioned(arena, 5);
            check((int) QUEUE_STATS.H.invokeExact(set, q, out));
            return words(out, 5);
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    @Override
    public long[] queueHolders(long set) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment n = arena.allocate(J);
            int st = (int) QUEUE_HOLDERS.H.invokeExact(set, MemorySegment.NULL, 0L, n);
            for (;;) {
                if (st != Status.OK && st != Status.BUFFER_TOO_SMALL) {
                    throw fail(st);
                }
                long cap = n.get(JAVA_LONG, 0) + 4; // holders may come meanwhile
                MemorySegment hs = arena.allocate(16L * cap, 8);
                st = (int) QUEUE_HOLDERS.H.invokeExact(set, hs, cap, n);
                if (st == Status.OK) {
                    int got = (int) n.get(JAVA_LONG, 0);
                    long[] v = new long[2 * got];
                    for (int i = 0; i < got; i++) {
                        v[2 * i] = Integer.toUnsignedLong(hs.get(JAVA_INT, 16L * i));
                        v[2 * i + 1] = hs.get(JAVA_LONG, 16L * i + 8);
                    }
                    return v;
                }
            }
        } catch (Throwable t) {
            throw wrap(t);
        }
    }

    /**
     * An element's bytes as a segment of an arena of its own, closed when the element is
     * pushed or given back: every buffer and segment over them then throws instead of
     * reaching bytes another holder owns. Shared, because an element may pass between
     * threads; made only when the bytes are first asked for, because closing a shared
     * arena costs a handshake with every thread of the JVM.
     */
    private static final class FfmRegion implements Region {
        private final Arena arena = Arena.ofShared();
        private final ByteBuffer buffer;

        FfmRegion(long address, int length) {
            buffer = MemorySegment.ofAddress(address).reinterpret(length, arena, null).asByteBuffer();
        }

        @Override
        public ByteBuffer buffer() {
            return buffer;
        }

        @Override
        public boolean revocable() {
            return true;
        }

        @Override
        public void revoke() {
            arena.close();
        }
    }

    @Override
    public Region region(long address, int length) {
        return new FfmRegion(address, length);
    }
}
