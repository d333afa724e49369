//! Key and value types recorded in maps (FORMAT.md, "Key and value types"): the codes of
//! the options that record them at creation, and the calls that read them.

use crate::*;
use shoal::DataType;

/// No type recorded (the default of the options; what an older map reads as).
pub const SHOAL_TYPE_NONE: u32 = 0;
/// Opaque bytes.
pub const SHOAL_TYPE_BYTES: u32 = 1;
/// UTF-8 text, no terminator.
pub const SHOAL_TYPE_UTF8: u32 = 2;
/// A signed integer: 8 bytes, two's complement, little-endian.
pub const SHOAL_TYPE_I64: u32 = 3;
/// An unsigned integer: 8 bytes, little-endian.
pub const SHOAL_TYPE_U64: u32 = 4;
/// IEEE 754 binary64, 8 bytes, little-endian.
pub const SHOAL_TYPE_F64: u32 = 5;
/// JSON text in UTF-8 (as keys: compact, object keys sorted).
pub const SHOAL_TYPE_JSON: u32 = 6;
/// An encoding of the application's own, named by a 64-bit tag.
pub const SHOAL_TYPE_USER: u32 = 7;

/// The type an option's code and tag ask for; `what` names the field in errors.
pub(crate) fn from_code(code: u32, tag: u64, what: &str) -> Res<Option<DataType>> {
    let t = match code {
        SHOAL_TYPE_NONE => None,
        SHOAL_TYPE_BYTES => Some(DataType::Bytes),
        SHOAL_TYPE_UTF8 => Some(DataType::Utf8),
        SHOAL_TYPE_I64 => Some(DataType::I64),
        SHOAL_TYPE_U64 => Some(DataType::U64),
        SHOAL_TYPE_F64 => Some(DataType::F64),
        SHOAL_TYPE_JSON => Some(DataType::Json),
        SHOAL_TYPE_USER => Some(DataType::User(tag)),
        c => {
            return Err(Fail::new(
                SHOAL_INVALID,
                format!("opts->{what}_type is {c}; it must be a SHOAL_TYPE_ code (0 to 7)"),
            ))
        }
    };
    if code != SHOAL_TYPE_USER && tag != 0 {
        return Err(Fail::new(
            SHOAL_INVALID,
            format!("opts->{what}_tag must be 0 unless {what}_type is SHOAL_TYPE_USER"),
        ));
    }
    Ok(t)
}

/// The code and tag of a recorded type (a code this library does not know is passed on).
fn to_code(t: Option<DataType>) -> (u32, u64) {
    match t {
        None => (SHOAL_TYPE_NONE, 0),
        Some(DataType::Bytes) => (SHOAL_TYPE_BYTES, 0),
        Some(DataType::Utf8) => (SHOAL_TYPE_UTF8, 0),
        Some(DataType::I64) => (SHOAL_TYPE_I64, 0),
        Some(DataType::U64) => (SHOAL_TYPE_U64, 0),
        Some(DataType::F64) => (SHOAL_TYPE_F64, 0),
        Some(DataType::Json) => (SHOAL_TYPE_JSON, 0),
        Some(DataType::User(tag)) => (SHOAL_TYPE_USER, tag),
        Some(DataType::Unknown(c)) => (c as u32, 0),
        Some(_) => (SHOAL_TYPE_BYTES, 0),
    }
}

/// Writes the types through the out-pointers (each may be NULL).
fn write_types(
    m: &impl shoal::KvMap,
    key_type: *mut u32,
    key_tag: *mut u64,
    value_type: *mut u32,
    value_tag: *mut u64,
) {
    let (kc, kt) = to_code(m.key_type());
    let (vc, vt) = to_code(m.value_type());
    for (p, v) in [(key_type, kc), (value_type, vc)] {
        if !p.is_null() {
            // SAFETY: non-NULL and writable by the callers' contract.
            unsafe { p.write(v) };
        }
    }
    for (p, v) in [(key_tag, kt), (value_tag, vt)] {
        if !p.is_null() {
            // SAFETY: as above.
            unsafe { p.write(v) };
        }
    }
}

/// The key and value types the map recorded when it was created: `SHOAL_TYPE_` codes
/// (`SHOAL_TYPE_NONE` when none was recorded; a code above 7, written by a newer library,
/// means bytes to this one) and the tags of `SHOAL_TYPE_USER` types (0 otherwise). Each
/// out-pointer may be NULL.
///
/// Errors: `SHOAL_NULL_POINTER` (the map).
///
/// # Safety
/// `map` is NULL or a live handle; each out-pointer is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_types(
    map: *const shoal_map,
    key_type: *mut u32,
    key_tag: *mut u64,
    value_type: *mut u32,
    value_tag: *mut u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { crate::map::map_ref(map) }?;
        write_types(m, key_type, key_tag, value_type, value_tag);
        Ok(SHOAL_OK)
    })
}

/// `shoal_map_types` for a fixed-size map.
///
/// Errors: `SHOAL_NULL_POINTER` (the map).
///
/// # Safety
/// `map` is NULL or a live handle; each out-pointer is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_types(
    map: *const shoal_fixed,
    key_type: *mut u32,
    key_tag: *mut u64,
    value_type: *mut u32,
    value_tag: *mut u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { crate::fixed::fixed_ref(map) }?;
        write_types(m, key_type, key_tag, value_type, value_tag);
        Ok(SHOAL_OK)
    })
}
