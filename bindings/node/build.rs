//! Sets up the linker flags of a Node-API addon (symbols resolved by `node` at load time).
fn main() {
    napi_build::setup();
}
