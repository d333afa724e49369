"""The Python worker of the cross-language matrix (scripts/test-matrix.sh describes the
protocol every language's worker follows), on the Python binding. The golden vectors are
checked with the xxhash package (PyPI, pinned in tests/matrix/requirements.txt).

    python worker.py STORE LANG LANGS KEYS ADDS VECTORS
"""

import struct
import sys
import time

import shoal
import xxhash

WAIT = 180.0


class Failure(Exception):
    pass


def golden(path):
    n = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 8:
                raise Failure(f"golden vector line {line!r}: 8 fields expected")
            seed = int(fields[0], 0)
            key = b"" if fields[1] == "-" else bytes.fromhex(fields[1])
            h = xxhash.xxh3_64_intdigest(key, seed=seed)
            got = [h, h >> 48, h >> 56, ((h >> 32) & 0xFFFF) * 59 >> 16, ((h >> 16) & 0xFFFF) % 4, h & 15]
            for name, g, want in zip(("hash", "tag", "cell tag", "home", "stash", "dir"), got, fields[2:]):
                if g != int(want, 0):
                    raise Failure(f"golden vector {n} (key {fields[1]}): {name} {g:#x}, want {want}")
            n += 1
    if n == 0:
        raise Failure(f"{path}: no vectors")
    return n


def var_value(lang, i):
    return f"{lang}:{i}:é€"


def fixed_key(lang, i):
    return (lang[:10].ljust(10, ".") + f"{i:06d}").encode()


def wait_for(start, what, get):
    while True:
        v = get()
        if v is not None:
            return v
        if time.monotonic() - start > WAIT:
            raise Failure(f"timed out waiting for {what}")
        time.sleep(0.005)


def run(path, lang, langs, keys, adds, vectors_path):
    if lang not in langs:
        raise Failure(f"{lang} is not in {langs}")
    ident = langs.index(lang)
    vectors = golden(vectors_path)
    start = time.monotonic()

    s = shoal.open(path)
    # Created with codecs, the maps record their types for every language.
    sync = s.map("mx_sync", key="str", value="str")
    var = s.map("mx_var", key="str", value="str")
    fixed = s.fixed_map("mx_fixed", 16, 8, key_type="bytes", value_type="f64")
    inline = s.fixed_map("mx_inline", 8, 8, key_type="u64", value_type="i64")
    count_fixed = s.fixed_map("mx_count_fixed", 8, 8, key_type="u64", value_type="i64")
    count_var = s.map("mx_count_var", key="str", value="int")
    if (inline.key_type, inline.value_type, fixed.value_type) != ("u64", "i64", "f64"):
        raise Failure("recorded types differ from the protocol's")

    sync[f"ready/{lang}"] = "1"
    for other in langs:
        wait_for(start, f"{other} to start (ready/{other})", lambda: sync.get(f"ready/{other}"))

    for i in range(keys):
        var[f"{lang}/{i}"] = var_value(lang, i)
        fixed[fixed_key(lang, i)] = struct.pack("<d", (ident * 1000 + i) + 0.25)
        inline[struct.pack("<Q", (ident + 1) << 32 | i)] = struct.pack("<q", -(ident * 1000 + i) - 1)
    for r in range(adds):
        count_fixed.add(struct.pack("<Q", r % 4), 1)
        count_var.add("total", 1)
    sync[f"done/{lang}"] = "1"

    # Opened without codecs: the binding takes the types the map recorded (str, int).
    var_any = s.map("mx_var")
    checked = 0
    for o, other in enumerate(langs):
        for i in range(keys):
            k = f"{other}/{i}"
            v = wait_for(start, f"{other}'s key {k!r} in mx_var", lambda: var_any.get(k))
            if v != var_value(other, i):
                raise Failure(f"{other}'s key {k!r} in mx_var: {v!r}, want {var_value(other, i)!r}")
            fk = fixed_key(other, i)
            (got,) = struct.unpack("<d", wait_for(start, f"{other}'s key {fk!r} in mx_fixed", lambda: fixed.get(fk)))
            if got != (o * 1000 + i) + 0.25:
                raise Failure(f"{other}'s key {fk!r} in mx_fixed: {got}, want {(o * 1000 + i) + 0.25}")
            ik = (o + 1) << 32 | i
            (gi,) = struct.unpack(
                "<q", wait_for(start, f"{other}'s key {ik} in mx_inline", lambda: inline.get(struct.pack("<Q", ik)))
            )
            if gi != -(o * 1000 + i) - 1:
                raise Failure(f"{other}'s key {ik} in mx_inline: {gi}, want {-(o * 1000 + i) - 1}")
            checked += 3

    for other in langs:
        wait_for(start, f"{other} to finish (done/{other})", lambda: sync.get(f"done/{other}"))
    n = len(langs)
    total = s.map("mx_count_var").get("total")
    if total != n * adds:
        raise Failure(f'mx_count_var "total": {total}, want {n * adds}')
    for c in range(4):
        raw = count_fixed.get(struct.pack("<Q", c))
        got = None if raw is None else struct.unpack("<q", raw)[0]
        want = n * (adds // 4 + (1 if c < adds % 4 else 0))
        if got != want:
            raise Failure(f"mx_count_fixed key {c}: {got}, want {want}")
    s.close()
    print(f"matrix {lang}: ok ({vectors} golden vectors; {checked} keys of {n} languages; counters {n * adds})")


def main():
    if len(sys.argv) != 7:
        print("usage: worker.py STORE LANG LANGS KEYS ADDS VECTORS", file=sys.stderr)
        sys.exit(2)
    path, lang, langs, keys, adds, vectors = sys.argv[1:]
    try:
        run(path, lang, langs.split(","), int(keys), int(adds), vectors)
    except Exception as e:  # every failure, with the language: the script says who failed
        print(f"matrix {lang}: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
