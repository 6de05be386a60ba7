//! Build steps of the agent:
//! - record the directory of the libpython the agent links (Python algorithms run in an
//!   embedded interpreter) as the binary's rpath, so that the agent loads the interpreter it
//!   was built against (e.g. a pyenv or venv base Python outside the loader's default path)
//!   rather than whichever `libpython3.x.so` the system loader finds first;
//! - generate the Rust code of the operator interface's Cap'n Proto schema. The schema lives
//!   in the repository's neutral `proto/` directory (proto/operator.capnp); the Python client
//!   (python/ccswitch/agent/operator.py) loads the same file, so the two sides cannot drift
//!   apart. Needs the `capnp` compiler on PATH.

/// The operator schema, relative to this crate.
const OPERATOR_SCHEMA: &str = "../proto/operator.capnp";

fn main() {
    let config = pyo3_build_config::get();
    if let Some(dir) = &config.lib_dir {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    generate_operator_schema();
    println!("cargo:rerun-if-changed=build.rs");
}

fn generate_operator_schema() {
    // The generated module is included as `crate::operator::operator_capnp`.
    if let Err(e) = capnpc::CompilerCommand::new()
        .src_prefix("../proto")
        .file(OPERATOR_SCHEMA)
        .default_parent_module(vec!["operator".into()])
        .run()
    {
        panic!("compiling {OPERATOR_SCHEMA} (is the `capnp` compiler installed?): {e}");
    }
    println!("cargo:rerun-if-changed={OPERATOR_SCHEMA}");
}
