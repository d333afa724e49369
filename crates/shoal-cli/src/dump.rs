//! `shoal dump` and `shoal load`: a portable JSON Lines format, streamed both ways.

use crate::cmds;
use crate::codec::B64;
use crate::fail::Fail;
use base64::Engine as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;
use shoal::{FixedMap, Map, MapKind, OrderedMap, Store};
use std::io::{BufRead, BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::Path;

/// `shoal dump --help`: the format, which `crates/shoal-cli/README.md` repeats.
pub const DUMP_HELP: &str = "\
Write the entries of a store, or of one MAP, to standard output in a portable line format \
that `shoal load` reads back: JSON Lines (UTF-8, one JSON object a line, '\\n' after each).

Each entry is one object:
  {\"map\": \"users\", \"key\": \"alice\", \"value\": \"admin\"}

\"map\" is the map's name (always a JSON string). \"key\" and \"value\" are JSON strings when \
the bytes are valid UTF-8, and otherwise an object holding their standard base64 (with \
padding):
  {\"map\": \"blobs\", \"key\": {\"b64\": \"AP8=\"}, \"value\": \"text\"}

A map without entries is written as one object with no key and value, so that loading \
re-creates it:
  {\"map\": \"empty\"}
A map created with options has such a line first, carrying them, so that loading creates it \
the same way: \"uids\": true for a map with stable UIDs (the UIDs themselves are not kept: a \
load hands out new ones), \"kind\": \"fixed\" with \"key_size\" and \"value_size\" for a \
fixed-size map, and \"key_type\" and \"value_type\" for a map that records its types \
(bytes, utf8, i64, u64, f64, json, user:0xTAG):
  {\"map\": \"counters\", \"kind\": \"fixed\", \"key_size\": 8, \"value_size\": 8, \"key_type\": \"u64\"}
In a map that records a number type, a key or value of that type is written as an object \
naming it, so that it reads as a number and loads back to the same 8 bytes:
  {\"map\": \"counters\", \"key\": {\"u64\": 17}, \"value\": {\"i64\": -3}}

An ordered map has a line {\"map\": \"idx\", \"kind\": \"ordered\"} first, and its entries \
follow in key order, all from one snapshot (one commit of the map). Ordered maps come after \
the hash maps. A map of integer keys adds \"u64_keys\": true to its line (each key is then \
its 8 little-endian bytes), a multimap \"duplicates\": true (one line per (key, value) \
pair, a key's values in order).

Maps come one after the other; entries within a hash map are in no particular order. Readers \
must ignore blank lines and must reject unknown fields. The dump is streamed: the store \
is read a segment at a time, never held whole in memory. Entries written while the dump \
runs may or may not appear (every entry present for the whole dump appears exactly once).

A damaged part of the store (entries of a segment that cannot be read or fail their \
checksums, a map that cannot be opened) is reported on stderr, naming the map and the \
segment, and skipped: the dump goes on with the rest, and exits with status 1 at the end. \
`shoal repair` drops what cannot be read.

A progress bar is drawn on stderr when stderr is a terminal.

Example:  shoal dump mystore > mystore.jsonl && shoal load copy < mystore.jsonl";

/// Writes `b`, of type `t`: a number type's 8 bytes as `{"i64": n}` (`u64`, `f64`: a
/// finite one), else as [`write_bytes`] does.
fn write_typed(w: &mut impl Write, b: &[u8], t: Option<shoal::DataType>) -> std::io::Result<()> {
    use shoal::DataType as T;
    if let (Some(t), Ok(word)) = (t, <[u8; 8]>::try_from(b)) {
        match t {
            T::I64 => return write!(w, "{{\"i64\":{}}}", i64::from_le_bytes(word)),
            T::U64 => return write!(w, "{{\"u64\":{}}}", u64::from_le_bytes(word)),
            T::F64 if f64::from_le_bytes(word).is_finite() => {
                let n = serde_json::Number::from_f64(f64::from_le_bytes(word));
                return write!(w, "{{\"f64\":{}}}", n.expect("finite"));
            }
            _ => {}
        }
    }
    write_bytes(w, b)
}

/// Writes `b` as a JSON string when it is UTF-8, else as `{"b64": "..."}`.
pub(crate) fn write_bytes(w: &mut impl Write, b: &[u8]) -> std::io::Result<()> {
    match std::str::from_utf8(b) {
        Ok(s) => serde_json::to_writer(&mut *w, s).map_err(std::io::Error::from),
        Err(_) => write!(w, "{{\"b64\":\"{}\"}}", B64.encode(b)),
    }
}

/// A progress bar on stderr only when stderr is a terminal.
fn progress(len: Option<u64>, template: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = match len {
        Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
        None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        let style = style
            .with_key(
                "rate",
                |st: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{}/s", crate::human::rate(st.per_sec()));
                },
            )
            .with_key(
                "byte_rate",
                |st: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{}/s", crate::human::size(st.per_sec() as u64));
                },
            );
        pb.set_style(style.progress_chars("=> "));
    }
    pb
}

/// `shoal dump`.
/// The entries of a map of either kind.
type Entries<'a> = Box<dyn Iterator<Item = shoal::Result<(Vec<u8>, Vec<u8>)>> + 'a>;

/// A map of either kind, opened without knowing how it was created.
enum AnyMap {
    Var(Map),
    Fixed(FixedMap),
    Ordered(OrderedMap),
}

impl AnyMap {
    fn open(s: &Store, name: &str) -> Result<Option<AnyMap>, Fail> {
        Ok(match s.map_kind(name)? {
            None => None,
            Some(MapKind::Variable { .. }) => Some(AnyMap::Var(cmds::open_map(s, name)?)),
            Some(MapKind::Fixed {
                key_size,
                value_size,
            }) => Some(AnyMap::Fixed(s.fixed_map_with(
                name,
                key_size,
                value_size,
                &shoal::FixedOptions::default(),
                false,
            )?)),
            Some(k) => {
                return Err(Fail::err(format!(
                    "map {name:?} is a {k}, which dump does not read"
                )))
            }
        })
    }

    fn name(&self) -> &str {
        match self {
            AnyMap::Var(m) => m.name(),
            AnyMap::Fixed(m) => m.name(),
            AnyMap::Ordered(m) => m.name(),
        }
    }

    fn len(&self) -> u64 {
        match self {
            AnyMap::Var(m) => m.len().unwrap_or(0),
            AnyMap::Fixed(m) => m.len().unwrap_or(0),
            AnyMap::Ordered(m) => m.len().unwrap_or(0),
        }
    }

    /// The key and value types the map records.
    fn types(&self) -> (Option<shoal::DataType>, Option<shoal::DataType>) {
        match self {
            AnyMap::Var(m) => (m.key_type(), m.value_type()),
            AnyMap::Fixed(m) => (m.key_type(), m.value_type()),
            AnyMap::Ordered(_) => (None, None),
        }
    }

    /// The option fields of the map's first line, if it was created with options.
    fn options(&self) -> Option<String> {
        let (kt, vt) = self.types();
        let mut types = String::new();
        for (f, t) in [("key_type", kt), ("value_type", vt)] {
            if let Some(t) = t {
                types.push_str(&format!(",\"{f}\":\"{}\"", t.name()));
            }
        }
        match self {
            AnyMap::Var(m) if m.has_uids() => Some(format!(",\"uids\":true{types}")),
            AnyMap::Var(_) if types.is_empty() => None,
            AnyMap::Var(_) => Some(format!(",\"uids\":false{types}")),
            AnyMap::Fixed(m) => Some(format!(
                ",\"kind\":\"fixed\",\"key_size\":{},\"value_size\":{}{types}",
                m.key_size(),
                m.value_size()
            )),
            AnyMap::Ordered(m) => Some(crate::ordered::kind_fields(m)),
        }
    }

    fn put(&self, k: &[u8], v: &[u8]) -> shoal::Result<()> {
        match self {
            AnyMap::Var(m) => m.put(k, v).map(|_| ()),
            AnyMap::Fixed(m) => m.put(k, v).map(|_| ()),
            AnyMap::Ordered(m) => m.put(k, v),
        }
    }

    fn entries(&self) -> Entries<'_> {
        match self {
            AnyMap::Var(m) => Box::new(m.iter()),
            AnyMap::Fixed(m) => Box::new(m.iter()),
            // Dumped by `crate::ordered::dump` instead (streamed from a snapshot).
            AnyMap::Ordered(m) => match m.range(None, None) {
                Ok(v) => Box::new(v.into_iter().map(Ok)),
                Err(e) => Box::new(std::iter::once(Err(e))),
            },
        }
    }
}

/// `shoal dump`.
pub fn dump(store: &Path, only: Option<&str>) -> Result<(), Fail> {
    let s = cmds::open_for_reading(store)?;
    // What could not be read: reported on stderr as it is met, and in the exit status.
    let mut damage: Vec<String> = Vec::new();
    let only_ordered = match only {
        Some(name) if crate::ordered::is_ordered(&s, name)? => {
            Some(crate::ordered::open(&s, name)?)
        }
        _ => None,
    };
    let maps: Vec<AnyMap> = match only {
        Some(_) if only_ordered.is_some() => Vec::new(),
        Some(name) => match AnyMap::open(&s, name)? {
            Some(m) => vec![m],
            None => {
                return Err(cmds::open_map(&s, name)
                    .err()
                    .unwrap_or_else(|| Fail::err(format!("no map named {name:?}"))))
            }
        },
        None => {
            let mut v = Vec::new();
            for name in s.maps()? {
                // None: dropped meanwhile. A map that cannot be opened (its header is
                // damaged) is reported, and the others are dumped.
                match AnyMap::open(&s, &name) {
                    Ok(m) => v.extend(m),
                    Err(Fail::Error(e)) => {
                        eprintln!("shoal: map {name:?} skipped: {e}");
                        damage.push(e);
                    }
                    Err(f) => return Err(f),
                }
            }
            v
        }
    };
    let ordered: Vec<OrderedMap> = match (only, only_ordered) {
        (_, Some(m)) => vec![m],
        (Some(_), None) => Vec::new(),
        (None, None) => {
            let mut v = Vec::new();
            for name in s.ordered_maps()? {
                v.push(crate::ordered::open(&s, &name)?);
            }
            v
        }
    };
    let total: u64 = maps.iter().map(AnyMap::len).sum::<u64>()
        + ordered.iter().map(|m| m.len().unwrap_or(0)).sum::<u64>();
    let pb = progress(
        Some(total),
        "dump {bar:40} {human_pos}/{human_len} entries  {rate}  eta {eta}",
    );
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut written = 0u64;
    for m in &maps {
        let mut name = Vec::new();
        serde_json::to_writer(&mut name, m.name()).map_err(std::io::Error::from)?;
        let opts = m.options();
        let (kt, vt) = m.types();
        if let Some(o) = &opts {
            out.write_all(b"{\"map\":")?;
            out.write_all(&name)?;
            out.write_all(o.as_bytes())?;
            out.write_all(b"}\n")?;
        }
        let mut n = 0u64;
        for item in m.entries() {
            // A damaged segment is one error, after the entries of it that could be read;
            // the iteration goes on with the next segment (or ends, if the map's
            // directory is damaged). Any other error ends the dump.
            let (k, v) = match item {
                Ok(kv) => kv,
                Err(e @ shoal::Error::Corrupt { .. }) => {
                    pb.suspend(|| eprintln!("shoal: {e}"));
                    damage.push(e.to_string());
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            out.write_all(b"{\"map\":")?;
            out.write_all(&name)?;
            out.write_all(b",\"key\":")?;
            write_typed(&mut out, &k, kt)?;
            out.write_all(b",\"value\":")?;
            write_typed(&mut out, &v, vt)?;
            out.write_all(b"}\n")?;
            n += 1;
            if n % 1024 == 0 {
                pb.inc(1024);
            }
        }
        pb.inc(n % 1024);
        if n == 0 && opts.is_none() {
            out.write_all(b"{\"map\":")?;
            out.write_all(&name)?;
            out.write_all(b"}\n")?;
        }
        written += n;
    }
    for m in &ordered {
        written += crate::ordered::dump(&mut out, m, || pb.inc(1))?;
    }
    out.flush()?;
    pb.finish_and_clear();
    if std::io::stderr().is_terminal() {
        eprintln!(
            "dumped {} entries from {} map(s)",
            crate::human::count(written),
            maps.len() + ordered.len()
        );
    }
    if !damage.is_empty() {
        return Err(Fail::No(format!(
            "the dump is incomplete: {} damaged part(s) of the store could not be read \
             (above); `shoal repair` drops them",
            damage.len()
        )));
    }
    Ok(())
}

/// The bytes of a "key" or "value" field.
fn field_bytes(v: &Value, what: &str) -> Result<Vec<u8>, String> {
    let bad = || {
        format!(
            "the {what} must be a string, or {{\"b64\": \"...\"}}, or a number as \
             {{\"i64\": n}}, {{\"u64\": n}} or {{\"f64\": x}}"
        )
    };
    let Value::Object(o) = v else {
        return match v {
            Value::String(s) => Ok(s.clone().into_bytes()),
            _ => Err(bad()),
        };
    };
    if o.len() != 1 {
        return Err(bad());
    }
    let word = match o.iter().next() {
        Some((k, Value::String(b))) if k == "b64" => {
            return B64
                .decode(b)
                .map_err(|e| format!("bad base64 in the {what}: {e}"))
        }
        Some((k, n)) if k == "i64" => n.as_i64().map(i64::to_le_bytes),
        Some((k, n)) if k == "u64" => n.as_u64().map(u64::to_le_bytes),
        Some((k, n)) if k == "f64" => n.as_f64().map(f64::to_le_bytes),
        _ => None,
    };
    word.map(|w| w.to_vec()).ok_or_else(bad)
}

/// A map's creation options on its first line: its kind, and the types it records.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct MapOpts {
    kind: MapKind,
    types: (Option<shoal::DataType>, Option<shoal::DataType>),
}

/// One parsed line: the map, its creation options (a map line may carry them), and the
/// entry unless it is a map-only line.
type Line = (String, Option<MapOpts>, Option<(Vec<u8>, Vec<u8>)>);

/// The boolean field `f` of a map line (false when absent).
fn flag(o: &serde_json::Map<String, Value>, f: &str) -> Result<bool, String> {
    match o.get(f) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(format!("\"{f}\" must be true or false")),
    }
}

fn parse_line(line: &str) -> Result<Line, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(o) = v else {
        return Err("not a JSON object".into());
    };
    if let Some(extra) = o.keys().find(|k| {
        !matches!(
            k.as_str(),
            "map"
                | "key"
                | "value"
                | "uids"
                | "kind"
                | "key_size"
                | "value_size"
                | "key_type"
                | "value_type"
                | "u64_keys"
                | "duplicates"
        )
    }) {
        return Err(format!("unknown field {extra:?}"));
    }
    let map = match o.get("map") {
        Some(Value::String(m)) => m.clone(),
        Some(_) => return Err("\"map\" must be a string".into()),
        None => return Err("no \"map\" field".into()),
    };
    let size = |f: &str| -> Result<usize, String> {
        o.get(f)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or(format!("a fixed-size map needs a numeric \"{f}\""))
    };
    let kind = match (o.get("kind"), o.get("uids")) {
        (None, None) if o.contains_key("key_size") || o.contains_key("value_size") => {
            return Err("\"key_size\" and \"value_size\" need \"kind\": \"fixed\"".into())
        }
        (None, None) => None,
        (None, Some(Value::Bool(u))) => Some(MapKind::Variable { uids: *u }),
        (Some(Value::String(k)), None) if k == "fixed" => Some(MapKind::Fixed {
            key_size: size("key_size")?,
            value_size: size("value_size")?,
        }),
        (Some(Value::String(k)), None) if k == "variable" => {
            Some(MapKind::Variable { uids: false })
        }
        (Some(Value::String(k)), None) if k == "ordered" => Some(MapKind::Ordered {
            u64_keys: flag(&o, "u64_keys")?,
            duplicates: flag(&o, "duplicates")?,
        }),
        _ => {
            return Err(
                "map options are \"uids\": true|false, \"kind\": \"fixed\" with sizes, or \
                 \"kind\": \"ordered\""
                    .into(),
            )
        }
    };
    if !matches!(kind, Some(MapKind::Ordered { .. }))
        && (o.contains_key("u64_keys") || o.contains_key("duplicates"))
    {
        return Err("\"u64_keys\" and \"duplicates\" need \"kind\": \"ordered\"".into());
    }
    let ty = |f: &str| -> Result<Option<shoal::DataType>, String> {
        match o.get(f) {
            None => Ok(None),
            Some(Value::String(n)) => n
                .parse::<shoal::DataType>()
                .map(Some)
                .map_err(|e| format!("\"{f}\": {e}")),
            Some(_) => Err(format!("\"{f}\" must be a string")),
        }
    };
    let types = (ty("key_type")?, ty("value_type")?);
    if matches!(kind, Some(MapKind::Ordered { .. }))
        && (types != (None, None) || o.contains_key("key_size") || o.contains_key("value_size"))
    {
        return Err("an ordered map's line has no types or sizes".into());
    }
    let kind = match kind {
        None if types != (None, None) => {
            return Err("\"key_type\" and \"value_type\" need \"uids\" or \"kind\"".into())
        }
        k => k.map(|kind| MapOpts { kind, types }),
    };
    match (o.get("key"), o.get("value")) {
        (None, None) => Ok((map, kind, None)),
        (Some(_), Some(_)) if kind.is_some() => {
            Err("map options go on a line of their own, before the entries".into())
        }
        (Some(k), Some(v)) => Ok((
            map,
            None,
            Some((field_bytes(k, "key")?, field_bytes(v, "value")?)),
        )),
        _ => Err("\"key\" and \"value\" must come together".into()),
    }
}

/// Opens (creating it as `opts` says, default a plain map) the map a load writes into.
fn load_target(s: &Store, name: &str, opts: Option<MapOpts>) -> shoal::Result<AnyMap> {
    let (key_type, value_type) = opts.map_or((None, None), |o| o.types);
    Ok(match opts.map(|o| o.kind) {
        Some(MapKind::Fixed {
            key_size,
            value_size,
        }) => AnyMap::Fixed(s.fixed_map_with(
            name,
            key_size,
            value_size,
            &shoal::FixedOptions {
                key_type,
                value_type,
                ..Default::default()
            },
            true,
        )?),
        Some(MapKind::Variable { uids }) => AnyMap::Var(s.map_with(
            name,
            &shoal::MapOptions {
                uids,
                key_type,
                value_type,
                ..Default::default()
            },
            true,
        )?),
        Some(MapKind::Ordered {
            u64_keys,
            duplicates,
        }) => AnyMap::Ordered(s.ordered_map_with(
            name,
            &shoal::OrderedOptions {
                u64_keys,
                duplicates,
            },
        )?),
        Some(k) => {
            return Err(shoal::Error::InvalidArgument(format!(
                "load does not write maps of this kind: {k}"
            )))
        }
        None => match s.map_kind(name)? {
            Some(MapKind::Fixed {
                key_size,
                value_size,
            }) => AnyMap::Fixed(s.fixed_map(name, key_size, value_size)?),
            Some(MapKind::Ordered { .. }) => AnyMap::Ordered(s.ordered_map(name)?),
            _ => AnyMap::Var(s.map(name)?),
        },
    })
}

/// `shoal load`.
pub fn load(store: &Path, file: Option<&Path>) -> Result<(), Fail> {
    let (input, len, name): (Box<dyn Read>, Option<u64>, String) = match file {
        Some(p) if p.as_os_str() != "-" => {
            let f = std::fs::File::open(p)
                .map_err(|e| Fail::err(format!("cannot read {}: {e}", p.display())))?;
            let len = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
            (Box::new(f), len, p.display().to_string())
        }
        _ => {
            use std::os::fd::AsFd;
            let stdin = std::io::stdin();
            let len = stdin
                .as_fd()
                .try_clone_to_owned()
                .ok()
                .map(std::fs::File::from)
                .and_then(|f| f.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len());
            (Box::new(stdin), len, "stdin".to_string())
        }
    };
    let s = cmds::open_or_create(store)?;
    let pb = match len {
        Some(_) => progress(
            len,
            "load {bar:40} {binary_bytes}/{binary_total_bytes}  {byte_rate}  eta {eta}",
        ),
        None => progress(None, "load {spinner} {binary_bytes}  {byte_rate}"),
    };
    let mut r = BufReader::with_capacity(1 << 16, input);
    let mut line = String::new();
    let mut cur: Option<AnyMap> = None;
    let mut maps: std::collections::HashSet<String> = Default::default();
    let (mut lineno, mut entries) = (0u64, 0u64);
    loop {
        line.clear();
        let n = match r.read_line(&mut line) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                return Err(Fail::err(format!(
                    "{name}, line {}: not UTF-8 text",
                    lineno + 1
                )))
            }
            Err(e) => return Err(Fail::err(format!("reading {name}: {e}"))),
        };
        if n == 0 {
            break;
        }
        lineno += 1;
        pb.inc(n as u64);
        if line.trim().is_empty() {
            continue;
        }
        let (map, kind, entry) =
            parse_line(&line).map_err(|e| Fail::err(format!("{name}, line {lineno}: {e}")))?;
        if kind.is_some() || cur.as_ref().map(|m| m.name()) != Some(map.as_str()) {
            let m = load_target(&s, &map, kind).map_err(|e| {
                let e = crate::fail::message(&e);
                Fail::err(format!("{name}, line {lineno}: map {map:?}: {e}"))
            })?;
            cur = Some(m);
            maps.insert(map);
        }
        if let (Some(m), Some((k, v))) = (&cur, entry) {
            m.put(&k, &v)
                .map_err(|e| Fail::err(format!("{name}, line {lineno}: {e}")))?;
            entries += 1;
        }
    }
    pb.finish_and_clear();
    println!(
        "loaded {} entries into {} map(s) of {}",
        crate::human::count(entries),
        maps.len(),
        s.path().display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse() {
        let (m, _, e) = parse_line(r#"{"map":"a","key":"k","value":{"b64":"AP8="}}"#).unwrap();
        assert_eq!(m, "a");
        assert_eq!(e, Some((b"k".to_vec(), vec![0, 255])));
        assert_eq!(
            parse_line(r#"{"map":"e"}"#).unwrap(),
            ("e".into(), None, None)
        );
        assert_eq!(
            parse_line(r#"{"map":"f","kind":"fixed","key_size":8,"value_size":4}"#).unwrap(),
            (
                "f".into(),
                Some(MapOpts {
                    kind: MapKind::Fixed {
                        key_size: 8,
                        value_size: 4
                    },
                    types: (None, None)
                }),
                None
            )
        );
        assert_eq!(
            parse_line(r#"{"map":"u","uids":true}"#).unwrap().1,
            Some(MapOpts {
                kind: MapKind::Variable { uids: true },
                types: (None, None)
            })
        );
        assert_eq!(
            parse_line(r#"{"map":"t","uids":false,"key_type":"utf8","value_type":"user:0x2a"}"#)
                .unwrap()
                .1,
            Some(MapOpts {
                kind: MapKind::Variable { uids: false },
                types: (Some(shoal::DataType::Utf8), Some(shoal::DataType::User(42)))
            })
        );
        assert_eq!(
            parse_line(r#"{"map":"o","kind":"ordered"}"#).unwrap().1,
            Some(MapOpts {
                kind: MapKind::Ordered {
                    u64_keys: false,
                    duplicates: false
                },
                types: (None, None)
            })
        );
        let (_, _, e) = parse_line(r#"{"map":"n","key":{"u64":7},"value":{"f64":-0.5}}"#).unwrap();
        assert_eq!(
            e,
            Some((
                7u64.to_le_bytes().to_vec(),
                (-0.5f64).to_le_bytes().to_vec()
            ))
        );
        for bad in [
            "nope",
            "[1]",
            r#"{"key":"k","value":"v"}"#,
            r#"{"map":"a","key":"k"}"#,
            r#"{"map":"a","key":1,"value":"v"}"#,
            r#"{"map":"a","key":{"b64":"!!"},"value":"v"}"#,
            r#"{"map":"a","key":"k","value":"v","ttl":3}"#,
            r#"{"map":"a","kind":"fixed","key_size":8}"#,
            r#"{"map":"a","kind":"tree"}"#,
            r#"{"map":"a","kind":"ordered","key_type":"utf8"}"#,
            r#"{"map":"a","kind":"ordered","key_size":8}"#,
            r#"{"map":"a","kind":"ordered","key":"k","value":"v"}"#,
            r#"{"map":"a","uids":true,"key":"k","value":"v"}"#,
            r#"{"map":"a","key_size":8,"value_size":8}"#,
            r#"{"map":"a","key_type":"utf8"}"#,
            r#"{"map":"a","uids":false,"key_type":"text"}"#,
            r#"{"map":"a","key":{"i64":1.5},"value":"v"}"#,
            r#"{"map":"a","key":{"u64":-1},"value":"v"}"#,
        ] {
            assert!(parse_line(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bytes_written() {
        let mut v = Vec::new();
        write_bytes(&mut v, "é\"\n".as_bytes()).unwrap();
        assert_eq!(String::from_utf8(v).unwrap(), r#""é\"\n""#);
        let mut v = Vec::new();
        write_bytes(&mut v, &[0xff]).unwrap();
        assert_eq!(String::from_utf8(v).unwrap(), r#"{"b64":"/w=="}"#);
    }
}
