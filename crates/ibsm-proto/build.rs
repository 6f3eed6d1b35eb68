//! Compiles proto/ with protox (a pure-Rust protobuf compiler), so building ibsm never
//! needs a system `protoc`. The production services (`ibsm/v1/control.proto`), the
//! `--fault-injection` test facility (`ibsm/v1/fault_injection.proto`) and the demo's
//! drills (`ibsm/demo/v1`) get descriptor sets of their own, so a server's reflection
//! lists only what it serves.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let production = ["ibsm/v1/control.proto"];
    let fault_injection = ["ibsm/v1/fault_injection.proto"];
    let demo = ["ibsm/demo/v1/demo.proto"];
    for f in production.iter().chain(&fault_injection).chain(&demo) {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    let production_fds = protox::compile(production, [&root])?;
    std::fs::write(
        out.join("ibsm_descriptor.bin"),
        prost::Message::encode_to_vec(&production_fds),
    )?;
    std::fs::write(
        out.join("ibsm_fault_injection_descriptor.bin"),
        prost::Message::encode_to_vec(&protox::compile(fault_injection, [&root])?),
    )?;
    // The demo's set holds its imports (ibsm/v1/control.proto) too, so reflection can
    // resolve the SmState it uses.
    std::fs::write(
        out.join("ibsm_demo_descriptor.bin"),
        prost::Message::encode_to_vec(&protox::compile(demo, [&root])?),
    )?;
    // Code is generated once, from every file.
    let all_fds = protox::compile(demo.iter().chain(&fault_injection), [&root])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(all_fds)?;
    Ok(())
}
