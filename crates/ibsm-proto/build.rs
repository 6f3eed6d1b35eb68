//! Compiles proto/ with protox (a pure-Rust protobuf compiler), so building ibsm never
//! needs a system `protoc`. The production services (`ibsm/v1`) and the demo's
//! (`ibsm/demo/v1`) get descriptor sets of their own, so a production server's
//! reflection lists no demo service.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let production = ["ibsm/v1/control.proto"];
    let demo = ["ibsm/demo/v1/demo.proto"];
    for f in production.iter().chain(&demo) {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    let production_fds = protox::compile(production, [&root])?;
    std::fs::write(
        out.join("ibsm_descriptor.bin"),
        prost::Message::encode_to_vec(&production_fds),
    )?;
    // The demo's set holds its imports (ibsm/v1/control.proto) too, so reflection can
    // resolve the SmState it uses; code is generated once, from this set.
    let all_fds = protox::compile(demo, [&root])?;
    std::fs::write(
        out.join("ibsm_demo_descriptor.bin"),
        prost::Message::encode_to_vec(&all_fds),
    )?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(all_fds)?;
    Ok(())
}
