//! Keys and self-describing values.
//!
//! A value is `KEY|SLOT.GEN|SEQ|PAD|` followed by `PAD` bytes generated from a hash of
//! that header. Everything in it is a function of (key, writer, sequence number, pad
//! length), so a reader can regenerate the exact bytes a writer stored and compare: a
//! value that is torn, mixed from two records, cut short, or filed under the wrong key
//! does not validate.

use std::fmt;
use std::str::FromStr;

/// A writer's identity: its lineage slot (which disjoint key space it owns) and its
/// generation (a writer started to replace a killed one gets the next generation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Wid {
    /// Lineage slot.
    pub slot: u32,
    /// Generation within the slot.
    pub gen: u32,
}

impl fmt::Display for Wid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.slot, self.gen)
    }
}

impl FromStr for Wid {
    type Err = String;
    fn from_str(s: &str) -> Result<Wid, String> {
        let (a, b) = s
            .split_once('.')
            .ok_or_else(|| format!("bad writer id {s:?}"))?;
        Ok(Wid {
            slot: a.parse().map_err(|_| format!("bad writer id {s:?}"))?,
            gen: b.parse().map_err(|_| format!("bad writer id {s:?}"))?,
        })
    }
}

/// Sequence numbers carry the generation in their high bits, so that within one lineage
/// they increase across kills and replacements.
pub const GEN_SHIFT: u32 = 40;

/// The first sequence number of generation `gen`.
pub fn first_seq(gen: u32) -> u64 {
    (gen as u64) << GEN_SHIFT
}

/// Key `i` of the disjoint key space owned by lineage `slot`.
pub fn disjoint_key(slot: u32, i: u64) -> String {
    format!("d{slot}:{i}")
}

/// Shared ("hot") key `i`, written by every writer.
pub fn hot_key(i: u64) -> String {
    format!("h:{i}")
}

/// The lineage that owns a disjoint key, or None for a hot key.
pub fn key_owner(key: &str) -> Option<u32> {
    key.strip_prefix('d')?.split_once(':')?.0.parse().ok()
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The value writer `wid` stores under `key` at sequence number `seq`, with `pad` bytes
/// of padding.
pub fn make_value(key: &str, wid: Wid, seq: u64, pad: u64) -> Vec<u8> {
    let mut v = format!("{key}|{wid}|{seq}|{pad}|").into_bytes();
    let mut st = shoal::format_hash(0x5eed, &v);
    v.reserve(pad as usize);
    let mut left = pad as usize;
    while left > 0 {
        let r = splitmix(&mut st).to_le_bytes();
        let n = left.min(8);
        v.extend_from_slice(&r[..n]);
        left -= n;
    }
    v
}

/// What a valid value says about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// The key it was written under.
    pub key: String,
    /// Its writer.
    pub wid: Wid,
    /// The writer's sequence number for the operation that stored it.
    pub seq: u64,
    /// Padding length.
    pub pad: u64,
}

/// Parses and fully validates a value (every byte is regenerated and compared).
pub fn parse_value(v: &[u8]) -> Result<Parsed, String> {
    let show = || String::from_utf8_lossy(&v[..v.len().min(80)]).into_owned();
    let mut fields = Vec::with_capacity(4);
    let mut pos = 0;
    for _ in 0..4 {
        let bar = v[pos..]
            .iter()
            .position(|&b| b == b'|')
            .ok_or_else(|| format!("malformed value {:?}", show()))?;
        fields.push(
            std::str::from_utf8(&v[pos..pos + bar])
                .map_err(|_| format!("malformed value {:?}", show()))?,
        );
        pos += bar + 1;
        if pos > 200 {
            return Err(format!("malformed value {:?}", show()));
        }
    }
    let wid: Wid = fields[1].parse()?;
    let seq: u64 = fields[2]
        .parse()
        .map_err(|_| format!("bad sequence number in {:?}", show()))?;
    let pad: u64 = fields[3]
        .parse()
        .map_err(|_| format!("bad pad length in {:?}", show()))?;
    let p = Parsed {
        key: fields[0].to_owned(),
        wid,
        seq,
        pad,
    };
    if (v.len() - pos) as u64 != pad {
        return Err(format!(
            "value {:?} of {} bytes: its header says {pad} bytes of padding, it has {}",
            show(),
            v.len(),
            v.len() - pos
        ));
    }
    if make_value(&p.key, wid, seq, pad) != v {
        return Err(format!(
            "value {:?} ({} bytes): padding differs from what its writer wrote (torn or mixed)",
            show(),
            v.len()
        ));
    }
    Ok(p)
}

/// Validates `v` as a value read under `key`.
pub fn check_value(key: &str, v: &[u8]) -> Result<Parsed, String> {
    let p = parse_value(v)?;
    if p.key != key {
        return Err(format!(
            "key {key:?} holds a value written for key {:?} (by {} seq {})",
            p.key, p.wid, p.seq
        ));
    }
    if let Some(owner) = key_owner(key) {
        if owner != p.wid.slot {
            return Err(format!(
                "disjoint key {key:?} of lineage {owner} holds a value written by {}",
                p.wid
            ));
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_roundtrip_and_damage_is_detected() {
        let w = Wid { slot: 3, gen: 7 };
        for pad in [0u64, 1, 7, 8, 9, 100, 70_000] {
            let v = make_value("d3:42", w, first_seq(7) + 5, pad);
            let p = check_value("d3:42", &v).unwrap();
            assert_eq!((p.wid, p.seq, p.pad), (w, first_seq(7) + 5, pad));
            if pad > 0 {
                let mut bad = v.clone();
                let n = bad.len();
                bad[n - 1] ^= 1;
                assert!(
                    parse_value(&bad).is_err(),
                    "flipped byte not detected (pad {pad})"
                );
                assert!(
                    parse_value(&v[..n - 1]).is_err(),
                    "truncation not detected (pad {pad})"
                );
            }
        }
        let v = make_value("d3:42", w, 1, 10);
        assert!(check_value("d3:43", &v).is_err(), "wrong key not detected");
        let v = make_value("d4:1", w, 1, 10);
        assert!(
            check_value("d4:1", &v).is_err(),
            "foreign writer on a disjoint key not detected"
        );
        assert!(check_value("h:1", &make_value("h:1", w, 1, 3)).is_ok());
        // A value whose tail comes from another record.
        let a = make_value("h:1", w, 1, 40);
        let b = make_value("h:1", Wid { slot: 1, gen: 0 }, 9, 40);
        let mut mixed = a[..a.len() - 20].to_vec();
        mixed.extend_from_slice(&b[b.len() - 20..]);
        assert!(parse_value(&mixed).is_err(), "mixed value not detected");
        assert_eq!(key_owner("d12:5"), Some(12));
        assert_eq!(key_owner("h:5"), None);
    }
}
