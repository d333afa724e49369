//! The committed `include/shoal.h` must be what cbindgen generates from the sources now.
//! `SHOAL_BLESS=1 cargo test -p shoal-ffi --test header` rewrites it.

use std::path::Path;

#[test]
fn committed_header_is_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_src(dir.join("src/lib.rs"))
        .with_config(config)
        .generate()
        .expect("cbindgen failed to generate the header");
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let path = dir.join("include/shoal.h");
    if std::env::var_os("SHOAL_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("writing include/shoal.h");
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    if committed != fresh {
        let tmp = tempfile::Builder::new()
            .suffix(".h")
            .tempfile()
            .expect("temp file");
        std::fs::write(tmp.path(), &fresh).expect("writing the temp header");
        let diff = std::process::Command::new("diff")
            .arg("-u")
            .arg(&path)
            .arg(tmp.path())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_else(|e| format!("(diff not available: {e})"));
        panic!(
            "include/shoal.h is out of date; regenerate it with \
             `SHOAL_BLESS=1 cargo test -p shoal-ffi --test header`:\n{diff}"
        );
    }
}
