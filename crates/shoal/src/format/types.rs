//! The key and value types a map may record when it is created: how its bytes encode
//! values, so that every process, in every language, picks the same codec without being
//! told. The engine stores and compares bytes whatever the types say; the bindings and the
//! `shoal` tool read them.

use super::map::{M_KEY_TAG, M_TYPES, M_VALUE_TAG};

/// How a map's keys or its values are encoded (FORMAT.md, "Key and value types"). Recorded
/// when a map is created ([`MapOptions`](crate::MapOptions),
/// [`FixedOptions`](crate::FixedOptions)); read with [`KvMap::key_type`](crate::KvMap::key_type)
/// and [`KvMap::value_type`](crate::KvMap::value_type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DataType {
    /// Opaque bytes, as they are.
    Bytes,
    /// UTF-8 text, no terminator.
    Utf8,
    /// A signed integer: 8 bytes, two's complement, little-endian.
    I64,
    /// An unsigned integer: 8 bytes, little-endian.
    U64,
    /// A floating-point number: 8 bytes, IEEE 754 binary64, little-endian.
    F64,
    /// JSON text in UTF-8 (a canonical form for keys: compact, object keys sorted).
    Json,
    /// An encoding of the application's own, named by an opaque tag that means something
    /// to the programs that share the map (`Python pickle` is one, see FORMAT.md).
    User(u64),
    /// A code this library does not know (written by a newer one): treat as bytes.
    Unknown(u8),
}

/// The tag of [`DataType::User`] that the Python binding records for its `pickle` codec:
/// the bytes `py:pickl` read as a little-endian u64.
pub const USER_TAG_PYTHON_PICKLE: u64 = u64::from_le_bytes(*b"py:pickl");

impl DataType {
    /// The type's code in the map header (0 is "none recorded").
    pub(crate) fn code(self) -> u8 {
        match self {
            DataType::Bytes => 1,
            DataType::Utf8 => 2,
            DataType::I64 => 3,
            DataType::U64 => 4,
            DataType::F64 => 5,
            DataType::Json => 6,
            DataType::User(_) => 7,
            DataType::Unknown(c) => c,
        }
    }

    fn tag(self) -> u64 {
        match self {
            DataType::User(t) => t,
            _ => 0,
        }
    }

    fn from_code(code: u8, tag: u64) -> Option<DataType> {
        Some(match code {
            0 => return None,
            1 => DataType::Bytes,
            2 => DataType::Utf8,
            3 => DataType::I64,
            4 => DataType::U64,
            5 => DataType::F64,
            6 => DataType::Json,
            7 => DataType::User(tag),
            c => DataType::Unknown(c),
        })
    }

    /// The size every value of the type has, if it has one (8 for the numbers).
    pub fn fixed_size(self) -> Option<usize> {
        match self {
            DataType::I64 | DataType::U64 | DataType::F64 => Some(8),
            _ => None,
        }
    }

    /// The type's name as the bindings and the `shoal` tool spell it: `bytes`, `utf8`,
    /// `i64`, `u64`, `f64`, `json`, `user:TAG` (TAG in hex), `unknown:CODE`.
    pub fn name(self) -> String {
        match self {
            DataType::Bytes => "bytes".into(),
            DataType::Utf8 => "utf8".into(),
            DataType::I64 => "i64".into(),
            DataType::U64 => "u64".into(),
            DataType::F64 => "f64".into(),
            DataType::Json => "json".into(),
            DataType::User(t) => format!("user:{t:#x}"),
            DataType::Unknown(c) => format!("unknown:{c}"),
        }
    }
}

/// A type by the name [`DataType::name`] gives it (`user:0x...` with the tag in hex); the
/// error says which names there are. `unknown:CODE` is not parsed: such a type is only
/// ever read from a map.
impl std::str::FromStr for DataType {
    type Err = String;

    fn from_str(s: &str) -> Result<DataType, String> {
        Ok(match s {
            "bytes" => DataType::Bytes,
            "utf8" => DataType::Utf8,
            "i64" => DataType::I64,
            "u64" => DataType::U64,
            "f64" => DataType::F64,
            "json" => DataType::Json,
            _ => match s
                .strip_prefix("user:0x")
                .and_then(|h| u64::from_str_radix(h, 16).ok())
            {
                Some(tag) => DataType::User(tag),
                None => {
                    return Err(format!(
                        "unknown type {s:?}; the types are bytes, utf8, i64, u64, f64, json \
                         and user:0xTAG"
                    ))
                }
            },
        })
    }
}

impl std::fmt::Display for DataType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// The three header words that record `key` and `value`, as (offset, word) pairs.
pub(crate) fn type_words(key: Option<DataType>, value: Option<DataType>) -> [(u64, u64); 3] {
    let code = |t: Option<DataType>| t.map_or(0, |t| t.code() as u64);
    let tag = |t: Option<DataType>| t.map_or(0, |t| t.tag());
    [
        (M_TYPES, code(key) | code(value) << 8),
        (M_KEY_TAG, tag(key)),
        (M_VALUE_TAG, tag(value)),
    ]
}

/// The key and value types recorded in a map header's words (`types`, key tag, value tag).
pub(crate) fn types_of(
    types: u64,
    key_tag: u64,
    value_tag: u64,
) -> (Option<DataType>, Option<DataType>) {
    (
        DataType::from_code(types as u8, key_tag),
        DataType::from_code((types >> 8) as u8, value_tag),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_words_give_back_the_types_they_record() {
        let all = [
            None,
            Some(DataType::Bytes),
            Some(DataType::Utf8),
            Some(DataType::I64),
            Some(DataType::U64),
            Some(DataType::F64),
            Some(DataType::Json),
            Some(DataType::User(0x1234_5678_9abc_def0)),
            Some(DataType::Unknown(200)),
        ];
        for k in all {
            for v in all {
                let [(_, t), (_, kt), (_, vt)] = type_words(k, v);
                assert_eq!(types_of(t, kt, vt), (k, v));
            }
        }
        // A code of a newer library reads as Unknown, not as an error.
        assert_eq!(
            types_of(9 | 2 << 8, 0, 0),
            (Some(DataType::Unknown(9)), Some(DataType::Utf8))
        );
        assert_eq!(&USER_TAG_PYTHON_PICKLE.to_le_bytes(), b"py:pickl");
        for t in all
            .into_iter()
            .flatten()
            .filter(|t| !matches!(t, DataType::Unknown(_)))
        {
            assert_eq!(t.name().parse::<DataType>(), Ok(t));
        }
        assert!("user:zz".parse::<DataType>().is_err());
        assert!("unknown:200".parse::<DataType>().is_err());
    }
}
