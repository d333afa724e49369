package io.shoal.internal;

import io.shoal.ShoalException;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.EnumSet;
import java.util.Locale;
import java.util.Set;

/**
 * Finds the native libraries: first on {@code java.library.path} (a system install, or a
 * build of one's own), else in the jar, extracted once into a private directory named by
 * the libraries' SHA-256s as the jar's {@code native.index} lists them with their sizes
 * ({@code ~/.cache/shoal-java/<hash>}, mode 0700). Content addressing lets jars of
 * different versions share a cache without overwriting each other's files while they are
 * mapped; bytes extracted from the jar are checked against the index first. Internal: not
 * part of the API.
 */
public final class NativeLoader {
    private NativeLoader() {}

    /** The C ABI, as cargo names it. */
    public static final String LIBSHOAL = "libshoal_ffi.so";
    /** The JNI shim (Java 17-21), linked to {@link #LIBSHOAL} with an $ORIGIN run path. */
    public static final String LIBJNI = "libshoaljni.so";

    private static final String[] BUNDLED = {LIBSHOAL, LIBJNI};

    /**
     * The library {@code name}'s path: from java.library.path if there, else extracted.
     *
     * @param name {@link #LIBSHOAL} or {@link #LIBJNI}
     * @return an absolute path to load
     */
    public static synchronized Path locate(String name) {
        String lp = System.getProperty("java.library.path", "");
        for (String dir : lp.split(File.pathSeparator)) {
            if (dir.isEmpty()) {
                continue;
            }
            Path p = Paths.get(dir, name);
            if (Files.isRegularFile(p)) {
                return p.toAbsolutePath();
            }
        }
        return extracted().resolve(name);
    }

    private static Path extractedDir;

    private static String platform() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        if (arch.equals("amd64") || arch.equals("x86_64")) {
            arch = "x86_64";
        } else if (arch.equals("aarch64") || arch.equals("arm64")) {
            arch = "aarch64";
        }
        return (os.startsWith("linux") ? "linux" : os.replace(' ', '_')) + "-" + arch;
    }

    /** One line of the jar's native.index: a bundled library's SHA-256, size and name. */
    private record Entry(String sha256, long size, String name) {}

    private static Path extracted() {
        if (extractedDir != null) {
            return extractedDir;
        }
        String base = "/io/shoal/native/" + platform() + "/";
        byte[] index = resource(base + "native.index");
        Entry[] entries = parseIndex(index, base);
        // The directory is named by the libraries' hashes as the index gives them: a fresh
        // JVM neither hashes megabytes in its interpreter nor starts a digest provider.
        StringBuilder name = new StringBuilder(32);
        for (Entry e : entries) {
            name.append(e.sha256(), 0, 32 / entries.length);
        }
        String hash = name.toString();
        IOException first = null;
        for (Path root : cacheRoots()) {
            try {
                Path dir = root.resolve(hash);
                privateDir(root);
                privateDir(dir);
                for (Entry e : entries) {
                    install(dir.resolve(e.name()), e, base);
                }
                extractedDir = dir;
                return dir;
            } catch (IOException e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        throw new ShoalException(0, "cannot extract the native libraries (set shoal.native.cache"
                + " to a writable directory, or put them on java.library.path)", first);
    }

    private static byte[] resource(String path) {
        try (InputStream in = NativeLoader.class.getResourceAsStream(path)) {
            if (in == null) {
                throw new ShoalException(0, "the jar holds no native library for " + platform()
                        + " (" + path + "); put " + LIBSHOAL + " and " + LIBJNI
                        + " on java.library.path");
            }
            return in.readAllBytes();
        } catch (IOException e) {
            throw new ShoalException(0, "reading " + path + " from the jar", e);
        }
    }

    private static Entry[] parseIndex(byte[] index, String base) {
        String[] lines = new String(index, java.nio.charset.StandardCharsets.UTF_8).split("\n");
        Entry[] out = new Entry[BUNDLED.length];
        for (String line : lines) {
            String[] f = line.trim().split(" ");
            if (f.length != 3) {
                continue;
            }
            for (int i = 0; i < BUNDLED.length; i++) {
                if (BUNDLED[i].equals(f[2])) {
                    if (!f[0].matches("[0-9a-f]{64}")) {
                        throw new ShoalException(0, base + "native.index: bad SHA-256 in " + line);
                    }
                    try {
                        out[i] = new Entry(f[0], Long.parseLong(f[1]), f[2]);
                    } catch (NumberFormatException e) {
                        throw new ShoalException(0, base + "native.index: bad size in " + line, e);
                    }
                }
            }
        }
        for (int i = 0; i < BUNDLED.length; i++) {
            if (out[i] == null) {
                throw new ShoalException(0, base + "native.index does not list " + BUNDLED[i]);
            }
        }
        return out;
    }

    private static byte[] sha256(byte[] bytes) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(bytes);
        } catch (NoSuchAlgorithmException e) {
            throw new ShoalException(0, "SHA-256 unavailable", e);
        }
    }

    private static Path[] cacheRoots() {
        String prop = System.getProperty("shoal.native.cache");
        if (prop != null && !prop.isEmpty()) {
            return new Path[] {Paths.get(prop)};
        }
        String xdg = System.getenv("XDG_CACHE_HOME");
        Path home = xdg != null && !xdg.isEmpty()
                ? Paths.get(xdg)
                : Paths.get(System.getProperty("user.home", "/nonexistent"), ".cache");
        String user = System.getProperty("user.name", "user").replaceAll("[^A-Za-z0-9_.-]", "_");
        return new Path[] {
            home.resolve("shoal-java"), Paths.get(System.getProperty("java.io.tmpdir"), "shoal-java-" + user)
        };
    }

    private static final Set<PosixFilePermission> OWNER_ONLY = EnumSet.of(
            PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE);

    /** Creates dir (0700) or checks that an existing one is ours and closed to others. */
    private static void privateDir(Path dir) throws IOException {
        try {
            Files.createDirectories(dir.getParent());
            Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(OWNER_ONLY));
        } catch (FileAlreadyExistsException e) {
            // Checked below.
        }
        if (!Files.isDirectory(dir, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            throw new IOException(dir + " is not a directory");
        }
        String me = System.getProperty("user.name");
        String owner = Files.getOwner(dir, java.nio.file.LinkOption.NOFOLLOW_LINKS).getName();
        // Another user's directory could hold a library of their choosing: refuse it.
        if (me != null && !me.equals(owner)) {
            throw new IOException(dir + " belongs to " + owner + ", not " + me);
        }
        Set<PosixFilePermission> perms = Files.getPosixFilePermissions(dir);
        if (perms.contains(PosixFilePermission.GROUP_WRITE) || perms.contains(PosixFilePermission.OTHERS_WRITE)) {
            Files.setPosixFilePermissions(dir, OWNER_ONLY);
        }
    }

    /**
     * Puts the library of {@code e} at {@code target} unless it is there. A file of the
     * right size in the directory is taken as whole without reading it: the directory is
     * the user's own and closed to others ({@link #privateDir}), so only that user could
     * have changed it (as they could change the jar), and a file appears there only by an
     * atomic rename of whole, verified bytes. Bytes read from the jar are checked against
     * the index before they are installed.
     */
    private static void install(Path target, Entry e, String base) throws IOException {
        if (Files.isRegularFile(target, java.nio.file.LinkOption.NOFOLLOW_LINKS)
                && Files.size(target) == e.size()) {
            return;
        }
        byte[] bytes = resource(base + e.name());
        if (bytes.length != e.size() || !hex(sha256(bytes)).equals(e.sha256())) {
            throw new ShoalException(0, base + e.name() + " in the jar does not match native.index");
        }
        // Written aside then renamed: a process that finds the name finds whole bytes.
        Path tmp = Files.createTempFile(target.getParent(), target.getFileName().toString(), ".tmp");
        try {
            Files.write(tmp, bytes);
            try {
                Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException ex) {
                Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING);
            }
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    private static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) {
            sb.append(Character.forDigit((x >> 4) & 15, 16)).append(Character.forDigit(x & 15, 16));
        }
        return sb.toString();
    }
}
