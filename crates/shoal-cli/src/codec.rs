//! Keys and values on the command line: UTF-8 text, hex or base64.

use crate::fail::Fail;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// Standard base64; decoding accepts input with or without padding.
pub const B64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// How bytes are written as text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// The bytes themselves (UTF-8 text).
    Text,
    /// Two hex digits a byte.
    Hex,
    /// Standard base64.
    Base64,
}

/// Decodes a command-line argument; `what` names it in errors ("key", "value").
pub fn decode_arg(arg: &OsStr, enc: Encoding, what: &str) -> Result<Vec<u8>, Fail> {
    decode(arg.as_bytes(), enc, what)
}

/// Decodes bytes written in `enc` (hex and base64 ignore surrounding whitespace).
pub fn decode(b: &[u8], enc: Encoding, what: &str) -> Result<Vec<u8>, Fail> {
    match enc {
        Encoding::Text => Ok(b.to_vec()),
        Encoding::Hex => decode_hex(b.trim_ascii())
            .map_err(|why| Fail::err(format!("bad hex in the {what}: {why}"))),
        Encoding::Base64 => B64
            .decode(b.trim_ascii())
            .map_err(|e| Fail::err(format!("bad base64 in the {what}: {e}"))),
    }
}

/// Hex digits to bytes.
pub fn decode_hex(s: &[u8]) -> Result<Vec<u8>, String> {
    if s.len() % 2 != 0 {
        return Err(format!("odd number of digits ({})", s.len()));
    }
    let digit = |c: u8, at: usize| -> Result<u8, String> {
        match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(format!(
                "{:?} at position {} is not a hex digit",
                char::from(c),
                at + 1
            )),
        }
    };
    s.chunks(2)
        .enumerate()
        .map(|(i, p)| Ok(digit(p[0], 2 * i)? << 4 | digit(p[1], 2 * i + 1)?))
        .collect()
}

/// Bytes to lowercase hex digits.
pub fn encode_hex(b: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for &x in b {
        s.push(D[(x >> 4) as usize] as char);
        s.push(D[(x & 15) as usize] as char);
    }
    s
}

pub use shoal_log::format::escape;

/// Bytes written in `enc` for output on one line (text is escaped, see [`escape`]).
pub fn encode_line(b: &[u8], enc: Encoding) -> String {
    match enc {
        Encoding::Text => escape(b),
        Encoding::Hex => encode_hex(b),
        Encoding::Base64 => B64.encode(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_errors() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode_hex(encode_hex(&all).as_bytes()).unwrap(), all);
        assert_eq!(
            decode_hex(b"DEADbeef").unwrap(),
            vec![0xde, 0xad, 0xbe, 0xef]
        );
        assert!(decode_hex(b"abc").unwrap_err().contains("odd"));
        assert!(decode_hex(b"zz").unwrap_err().contains("not a hex digit"));
    }

    #[test]
    fn base64_with_or_without_padding() {
        assert_eq!(decode(b"aGk=", Encoding::Base64, "key").unwrap(), b"hi");
        assert_eq!(decode(b"aGk", Encoding::Base64, "key").unwrap(), b"hi");
        assert!(decode(b"!!", Encoding::Base64, "key").is_err());
    }
}
