//! What the subcommands do with ordered maps: dump them in key order, list and stat them,
//! and get, put and del their keys.

use crate::fail::Fail;
use shoal::{MapKind, OrderedMap, Store};
use std::io::Write;

/// The size of an ordered map's pages (FORMAT.md, "Ordered maps").
const PAGE_BYTES: u64 = 4096;

/// Whether `name` is an ordered map of `s`.
pub fn is_ordered(s: &Store, name: &str) -> Result<bool, Fail> {
    Ok(matches!(s.map_kind(name)?, Some(MapKind::Ordered { .. })))
}

/// Opens the ordered map `name`, which exists.
pub fn open(s: &Store, name: &str) -> Result<OrderedMap, Fail> {
    Ok(s.ordered_map(name)?)
}

/// The figures `stat` and `ls -l` show for an ordered map.
pub struct Row {
    pub name: String,
    pub entries: u64,
    /// Pages the map holds (its tree and its free pages).
    pub pages: u64,
}

impl Row {
    /// Bytes of the map's pages.
    pub fn bytes(&self) -> u64 {
        self.pages * PAGE_BYTES
    }

    /// Bytes of pages per entry (None when empty).
    pub fn bytes_per_entry(&self) -> Option<f64> {
        (self.entries > 0).then(|| self.bytes() as f64 / self.entries as f64)
    }

    /// The row as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "entries": self.entries,
            "pages": self.pages,
            "bytes": self.bytes(),
            "bytes_per_entry": self.bytes_per_entry(),
        })
    }
}

/// The ordered maps of `s` with their figures.
pub fn rows(s: &Store) -> Result<Vec<Row>, Fail> {
    let mut out = Vec::new();
    for name in s.ordered_maps()? {
        match s.object_stats(&name) {
            Ok(Some(st)) => out.push(Row {
                name,
                entries: st.entries,
                pages: st.index_bytes / PAGE_BYTES,
            }),
            Ok(None) | Err(shoal::Error::NotFound(_)) => {} // dropped meanwhile
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

/// The table `stat` prints for ordered maps.
pub fn table(rows: &[Row]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.name.clone(),
                crate::human::count(r.entries),
                crate::human::count(r.pages),
                crate::human::size(r.bytes()),
                r.bytes_per_entry()
                    .map_or_else(|| "-".to_string(), |b| format!("{b:.1}")),
            ]
        })
        .collect();
    crate::human::table(
        &["ORDERED MAP", "ENTRIES", "PAGES", "BYTES", "BYTES/ENTRY"],
        &cells,
        &[0],
    )
}

/// The fields of a dump's map line for `m` after its name: the kind, and the options it
/// was created with (only those set, so that a plain map's line stays as it was).
pub fn kind_fields(m: &OrderedMap) -> String {
    let o = m.options();
    let mut f = String::from(",\"kind\":\"ordered\"");
    if o.u64_keys {
        f.push_str(",\"u64_keys\":true");
    }
    if o.duplicates {
        f.push_str(",\"duplicates\":true");
    }
    f
}

/// Writes every entry of `m` as dump lines (after its `"kind": "ordered"` line), in key
/// order, from one snapshot: the dump of an ordered map is a consistent copy of one
/// commit. A map of integer keys writes each key as its 8 little-endian bytes, a
/// multimap one line per (key, value) pair. Returns the number of entries.
pub fn dump(out: &mut impl Write, m: &OrderedMap, mut each: impl FnMut()) -> Result<u64, Fail> {
    let mut name = Vec::new();
    serde_json::to_writer(&mut name, m.name()).map_err(std::io::Error::from)?;
    out.write_all(b"{\"map\":")?;
    out.write_all(&name)?;
    out.write_all(kind_fields(m).as_bytes())?;
    out.write_all(b"}\n")?;
    let snap = m.snapshot()?;
    let mut n = 0u64;
    let mut err: Option<std::io::Error> = None;
    snap.for_each(None, None, false, |k, v| {
        let r = (|| {
            out.write_all(b"{\"map\":")?;
            out.write_all(&name)?;
            out.write_all(b",\"key\":")?;
            crate::dump::write_bytes(out, k)?;
            out.write_all(b",\"value\":")?;
            crate::dump::write_bytes(out, v)?;
            out.write_all(b"}\n")
        })();
        match r {
            Ok(()) => {
                n += 1;
                each();
                true
            }
            Err(e) => {
                err = Some(e);
                false
            }
        }
    })?;
    if let Some(e) = err {
        return Err(e.into());
    }
    Ok(n)
}
