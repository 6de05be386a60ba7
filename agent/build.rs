//! Record the directory of the libpython the agent links (Python algorithms run in an
//! embedded interpreter) as the binary's rpath, so that the agent loads the interpreter it
//! was built against (e.g. a pyenv or venv base Python outside the loader's default path)
//! rather than whichever `libpython3.x.so` the system loader finds first.

fn main() {
    let config = pyo3_build_config::get();
    if let Some(dir) = &config.lib_dir {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
