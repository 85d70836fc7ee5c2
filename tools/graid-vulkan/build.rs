//! Compiles the WGSL compute shaders to SPIR-V with naga (no Vulkan SDK at build time).

use std::path::PathBuf;

/// Compiles `shaders/{name}.wgsl`, with `shaders/gf.wgsl` before it (WGSL has no includes).
fn compile(name: &str) {
    let source_path = format!("shaders/{name}.wgsl");
    println!("cargo::rerun-if-changed={source_path}");
    println!("cargo::rerun-if-changed=shaders/gf.wgsl");
    let prelude = std::fs::read_to_string("shaders/gf.wgsl").expect("read gf.wgsl");
    let body = std::fs::read_to_string(&source_path).expect("read the shader");
    let source = format!("{prelude}\n{body}");
    let module = naga::front::wgsl::parse_str(&source)
        .unwrap_or_else(|e| panic!("{source_path}: {}", e.emit_to_string(&source)));
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::IMMEDIATES,
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{source_path}: {}", e.emit_to_string(&source)));
    let words = naga::back::spv::write_vec(
        &module,
        &info,
        &naga::back::spv::Options::default(),
        Some(&naga::back::spv::PipelineOptions {
            shader_stage: naga::ShaderStage::Compute,
            entry_point: "main".into(),
        }),
    )
    .expect("SPIR-V out");
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join(format!("{name}.spv"));
    std::fs::write(out, bytes).expect("write the SPIR-V");
}

fn main() {
    compile("parity");
    compile("recover");
    compile("update");
}
