//! The Rust worker of the cross-language matrix (scripts/test-matrix.sh, which describes
//! the protocol every language's worker follows): checks the golden vectors, opens the
//! shared store beside the other languages' workers, writes its keys into a variable, a
//! fixed and an inline map, adds to the shared counters, reads and checks every other
//! language's keys, and checks the counters' exact totals once every worker is done.
//!
//! `cargo run --release --example matrix_worker -- STORE LANG LANGS KEYS ADDS VECTORS`

use shoal::{DataType, FixedOptions, MapOptions, Store};
use std::time::{Duration, Instant};

/// How long a worker waits for the others (their start, their keys, their end): far more
/// than a run takes on two busy cores, so that only a worker that died or hung reaches it.
const WAIT: Duration = Duration::from_secs(180);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 6 {
        eprintln!("usage: matrix_worker STORE LANG LANGS KEYS ADDS VECTORS");
        std::process::exit(2);
    }
    let lang = args[1].clone();
    if let Err(e) = run(&args) {
        eprintln!("matrix {lang}: FAILED: {e}");
        std::process::exit(1);
    }
}

fn num(s: &str) -> Result<u64, String> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .map_err(|e| format!("bad number {s:?}: {e}"))
}

/// Checks every vector of golden.tsv with XXH3-64 (xxhash-rust, the engine's own hash).
fn golden(path: &str) -> Result<usize, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut n = 0;
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != 8 {
            return Err(format!("golden vector line {line:?}: 8 fields expected"));
        }
        let key = if f[1] == "-" {
            Vec::new()
        } else {
            (0..f[1].len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&f[1][i..i + 2], 16).map_err(|e| e.to_string()))
                .collect::<Result<Vec<u8>, String>>()?
        };
        let h = xxhash_rust::xxh3::xxh3_64_with_seed(&key, num(f[0])?);
        let got = [
            h,
            h >> 48,
            h >> 56,
            (((h >> 32) & 0xffff) * 59) >> 16,
            ((h >> 16) & 0xffff) % 4,
            h & 15,
        ];
        for (i, name) in ["hash", "tag", "cell tag", "home", "stash", "dir"]
            .iter()
            .enumerate()
        {
            if got[i] != num(f[i + 2])? {
                return Err(format!(
                    "golden vector {n} (key {}): {name} {:#x}, want {}",
                    f[1],
                    got[i],
                    f[i + 2]
                ));
            }
        }
        n += 1;
    }
    if n == 0 {
        return Err(format!("{path}: no vectors"));
    }
    Ok(n)
}

fn var_value(lang: &str, i: u64) -> String {
    format!("{lang}:{i}:é€")
}

fn fixed_key(lang: &str, i: u64) -> Vec<u8> {
    format!("{lang:.<10}{i:06}").into_bytes()
}

fn fixed_value(id: u64, i: u64) -> f64 {
    (id * 1000 + i) as f64 + 0.25
}

fn inline_key(id: u64, i: u64) -> [u8; 8] {
    ((id + 1) << 32 | i).to_le_bytes()
}

fn inline_value(id: u64, i: u64) -> i64 {
    -((id * 1000 + i) as i64) - 1
}

/// Polls `f` until it gives a value, for at most [`WAIT`] since `start`.
fn wait<T>(
    start: Instant,
    what: &dyn Fn() -> String,
    mut f: impl FnMut() -> Result<Option<T>, String>,
) -> Result<T, String> {
    loop {
        if let Some(v) = f()? {
            return Ok(v);
        }
        if start.elapsed() > WAIT {
            return Err(format!("timed out waiting for {}", what()));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let (path, lang) = (&args[0], args[1].as_str());
    let langs: Vec<&str> = args[2].split(',').collect();
    let keys = num(&args[3])?;
    let adds = num(&args[4])?;
    let id = langs
        .iter()
        .position(|l| *l == lang)
        .ok_or(format!("{lang} not in {langs:?}"))? as u64;
    let vectors = golden(&args[5])?;
    let e = |what: &str| {
        let what = what.to_string();
        move |err: shoal::Error| format!("{what}: {err}")
    };
    let start = Instant::now();

    let store = Store::open(path).map_err(e("open"))?;
    let typed = |k, v| MapOptions {
        key_type: Some(k),
        value_type: Some(v),
        ..Default::default()
    };
    let fixed_typed = |k, v| FixedOptions {
        key_type: Some(k),
        value_type: Some(v),
        ..Default::default()
    };
    let sync = store
        .map_with("mx_sync", &typed(DataType::Utf8, DataType::Utf8), true)
        .map_err(e("mx_sync"))?;
    let var = store
        .map_with("mx_var", &typed(DataType::Utf8, DataType::Utf8), true)
        .map_err(e("mx_var"))?;
    let fixed = store
        .fixed_map_with(
            "mx_fixed",
            16,
            8,
            &fixed_typed(DataType::Bytes, DataType::F64),
            true,
        )
        .map_err(e("mx_fixed"))?;
    let inline = store
        .fixed_map_with(
            "mx_inline",
            8,
            8,
            &fixed_typed(DataType::U64, DataType::I64),
            true,
        )
        .map_err(e("mx_inline"))?;
    let count_fixed = store
        .fixed_map_with(
            "mx_count_fixed",
            8,
            8,
            &fixed_typed(DataType::U64, DataType::I64),
            true,
        )
        .map_err(e("mx_count_fixed"))?;
    let count_var = store
        .map_with("mx_count_var", &typed(DataType::Utf8, DataType::I64), true)
        .map_err(e("mx_count_var"))?;
    // Whoever created a map, the types recorded are the ones every worker asks for.
    if var.value_type() != Some(DataType::Utf8) || inline.key_type() != Some(DataType::U64) {
        return Err("recorded types differ from the protocol's".into());
    }

    let flag = |what: &str, l: &str| format!("{what}/{l}");
    sync.put(flag("ready", lang).as_bytes(), b"1")
        .map_err(e("ready"))?;
    for l in &langs {
        let k = flag("ready", l);
        wait(start, &|| format!("{l} to start ({k})"), || {
            sync.get(k.as_bytes()).map_err(|x| x.to_string())
        })?;
    }

    for i in 0..keys {
        var.put(
            format!("{lang}/{i}").as_bytes(),
            var_value(lang, i).as_bytes(),
        )
        .map_err(e("mx_var put"))?;
        fixed
            .put(&fixed_key(lang, i), &fixed_value(id, i).to_le_bytes())
            .map_err(e("mx_fixed put"))?;
        inline
            .put(&inline_key(id, i), &inline_value(id, i).to_le_bytes())
            .map_err(e("mx_inline put"))?;
    }
    for r in 0..adds {
        count_fixed
            .add(&(r % 4).to_le_bytes(), 1)
            .map_err(e("mx_count_fixed add"))?;
        count_var.add(b"total", 1).map_err(e("mx_count_var add"))?;
    }
    sync.put(flag("done", lang).as_bytes(), b"1")
        .map_err(e("done"))?;

    let mut checked = 0;
    for (other_id, other) in langs.iter().enumerate() {
        let oid = other_id as u64;
        for i in 0..keys {
            let k = format!("{other}/{i}");
            let v = wait(start, &|| format!("{other}'s key {k:?} in mx_var"), || {
                var.get(k.as_bytes()).map_err(|x| x.to_string())
            })?;
            if v != var_value(other, i).as_bytes() {
                return Err(format!(
                    "{other}'s key {k:?} in mx_var: {:?}, want {:?}",
                    String::from_utf8_lossy(&v),
                    var_value(other, i)
                ));
            }
            let fk = fixed_key(other, i);
            let v = wait(
                start,
                &|| {
                    format!(
                        "{other}'s key {:?} in mx_fixed",
                        String::from_utf8_lossy(&fk)
                    )
                },
                || fixed.get(&fk).map_err(|x| x.to_string()),
            )?;
            let got = f64::from_le_bytes(v[..].try_into().map_err(|_| "mx_fixed value size")?);
            if got != fixed_value(oid, i) {
                return Err(format!(
                    "{other}'s key {:?} in mx_fixed: {got}, want {}",
                    String::from_utf8_lossy(&fk),
                    fixed_value(oid, i)
                ));
            }
            let ik = inline_key(oid, i);
            let v = wait(
                start,
                &|| format!("{other}'s key {} in mx_inline", u64::from_le_bytes(ik)),
                || inline.get(&ik).map_err(|x| x.to_string()),
            )?;
            let got = i64::from_le_bytes(v[..].try_into().map_err(|_| "mx_inline value size")?);
            if got != inline_value(oid, i) {
                return Err(format!(
                    "{other}'s key {} in mx_inline: {got}, want {}",
                    u64::from_le_bytes(ik),
                    inline_value(oid, i)
                ));
            }
            checked += 3;
        }
    }

    for l in &langs {
        let k = flag("done", l);
        wait(start, &|| format!("{l} to finish ({k})"), || {
            sync.get(k.as_bytes()).map_err(|x| x.to_string())
        })?;
    }
    let n = langs.len() as u64;
    let total = count_var
        .get(b"total")
        .map_err(e("mx_count_var get"))?
        .map(|v| i64::from_le_bytes(v[..].try_into().unwrap_or([0; 8])));
    if total != Some((n * adds) as i64) {
        return Err(format!(
            "mx_count_var \"total\": {total:?}, want {}",
            n * adds
        ));
    }
    for c in 0..4u64 {
        let want = (n * (adds / 4 + u64::from(c < adds % 4))) as i64;
        let got = count_fixed
            .get(&c.to_le_bytes())
            .map_err(e("mx_count_fixed get"))?
            .map(|v| i64::from_le_bytes(v[..].try_into().unwrap_or([0; 8])));
        if got != Some(want) {
            return Err(format!("mx_count_fixed key {c}: {got:?}, want {want}"));
        }
    }
    println!(
        "matrix {lang}: ok ({vectors} golden vectors; {checked} keys of {n} languages; counters {})",
        n * adds
    );
    Ok(())
}
