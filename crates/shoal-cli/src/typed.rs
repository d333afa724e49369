//! Keys and values of maps that record their types (FORMAT.md, "Key and value types"):
//! written on the command line and printed as what they are (numbers as numbers, JSON as
//! its text) instead of as bytes. `--hex` and `--base64` still give the bytes themselves.

use crate::fail::Fail;
use shoal::DataType;

/// The bytes a command-line text means for a key or value of type `t` (`what`: "key" or
/// "value", for errors): a number for the number types, JSON (written in its canonical
/// form: compact, object keys sorted) for `json`, the text's bytes otherwise.
pub fn parse(text: &[u8], t: Option<DataType>, what: &str) -> Result<Vec<u8>, Fail> {
    let s = || {
        std::str::from_utf8(text)
            .map(str::trim)
            .map_err(|_| Fail::err(format!("the {what} is not UTF-8 text")))
    };
    let bad = |e: &dyn std::fmt::Display, ty: DataType| {
        Fail::err(format!("the {what} is not {}: {e}", describe(ty)))
    };
    Ok(match t {
        Some(ty @ DataType::I64) => s()?
            .parse::<i64>()
            .map_err(|e| bad(&e, ty))?
            .to_le_bytes()
            .to_vec(),
        Some(ty @ DataType::U64) => s()?
            .parse::<u64>()
            .map_err(|e| bad(&e, ty))?
            .to_le_bytes()
            .to_vec(),
        Some(ty @ DataType::F64) => s()?
            .parse::<f64>()
            .map_err(|e| bad(&e, ty))?
            .to_le_bytes()
            .to_vec(),
        Some(ty @ DataType::Json) => {
            let v: serde_json::Value = serde_json::from_str(s()?).map_err(|e| bad(&e, ty))?;
            // serde_json's maps are sorted by key (no `preserve_order`): canonical.
            serde_json::to_vec(&v).map_err(|e| bad(&e, ty))?
        }
        _ => text.to_vec(),
    })
}

fn describe(t: DataType) -> &'static str {
    match t {
        DataType::I64 => "a signed 64-bit integer (the map records i64)",
        DataType::U64 => "an unsigned 64-bit integer (the map records u64)",
        DataType::F64 => "a number (the map records f64)",
        DataType::Json => "JSON (the map records json)",
        _ => "valid",
    }
}

/// Stored bytes of type `t` as text, when the type says how: numbers in decimal (an `f64`
/// as the shortest text that reads back to it), `utf8` and `json` as their text. `None`
/// when the type says nothing, or the bytes are not of it (8 bytes for a number, UTF-8 for
/// text).
pub fn show(b: &[u8], t: Option<DataType>) -> Option<String> {
    let word = || <[u8; 8]>::try_from(b).ok();
    match t? {
        DataType::I64 => Some(i64::from_le_bytes(word()?).to_string()),
        DataType::U64 => Some(u64::from_le_bytes(word()?).to_string()),
        DataType::F64 => Some(f64::from_le_bytes(word()?).to_string()),
        DataType::Utf8 | DataType::Json => std::str::from_utf8(b).ok().map(str::to_owned),
        _ => None,
    }
}

/// The key and value types recorded by the map `name` of `store` (none for a queue set or
/// a map that recorded none).
pub fn of(store: &shoal::Store, name: &str) -> shoal::Result<(Option<DataType>, Option<DataType>)> {
    Ok(match store.map_kind(name)? {
        Some(shoal::MapKind::Variable { .. }) => {
            let m = store.open_map(name)?;
            (m.key_type(), m.value_type())
        }
        Some(shoal::MapKind::Fixed {
            key_size,
            value_size,
        }) => {
            let m = store.fixed_map_with(
                name,
                key_size,
                value_size,
                &shoal::FixedOptions::default(),
                false,
            )?;
            (m.key_type(), m.value_type())
        }
        _ => (None, None),
    })
}

/// The two types as `shoal stat` shows them: `utf8 → json`, `- → i64`; empty when none.
pub fn label(k: Option<DataType>, v: Option<DataType>) -> String {
    if k.is_none() && v.is_none() {
        return String::new();
    }
    let n = |t: Option<DataType>| t.map_or("-".to_string(), |t| t.name());
    format!("{} → {}", n(k), n(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_text_round_trips() {
        for (t, text) in [
            (DataType::I64, "-42"),
            (DataType::U64, "18446744073709551615"),
            (DataType::F64, "0.1"),
            (DataType::Json, r#"{"a":[1,"é"],"b":null}"#),
            (DataType::Utf8, "héllo"),
        ] {
            let b = parse(text.as_bytes(), Some(t), "value").unwrap();
            assert_eq!(show(&b, Some(t)).as_deref(), Some(text), "{t}");
        }
        assert_eq!(
            parse(br#"{ "b": 1, "a": 2 }"#, Some(DataType::Json), "key").unwrap(),
            br#"{"a":2,"b":1}"#
        );
        assert_eq!(parse(b"7", None, "key").unwrap(), b"7");
        for (t, text) in [
            (DataType::I64, "1.5"),
            (DataType::U64, "-1"),
            (DataType::F64, "x"),
            (DataType::Json, "{"),
        ] {
            assert!(
                parse(text.as_bytes(), Some(t), "value").is_err(),
                "{t} {text}"
            );
        }
        assert_eq!(show(b"short", Some(DataType::I64)), None);
        assert_eq!(show(b"\xff", Some(DataType::Bytes)), None);
        assert_eq!(label(Some(DataType::Utf8), None), "utf8 → -");
    }
}
