//! Gives the shared library the SONAME `libshoal.so.<major>` it is installed under, so a
//! program linked against the installed `libshoal.so` records the versioned name.

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "freebsd" || os == "netbsd" || os == "openbsd" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libshoal.so.{major}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
