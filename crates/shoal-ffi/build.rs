//! Gives the shared library its SONAME. A plain `cargo build` names it after the file it
//! writes, `libshoal_ffi.so`, so that a program linked by hand with `-lshoal_ffi` finds it
//! at run time (through its rpath or `LD_LIBRARY_PATH`). The CMake build sets
//! `SHOAL_FFI_SONAME=libshoal.so.<major>`, the versioned name it installs the library
//! under, so that programs linked against the installed `libshoal.so` record that name.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SHOAL_FFI_SONAME");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "freebsd" || os == "netbsd" || os == "openbsd" {
        let soname = std::env::var("SHOAL_FFI_SONAME")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "libshoal_ffi.so".into());
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    }
}
