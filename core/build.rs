//! Embeds the sample corpus (../corpus/*.md) as (name, text) pairs: the bundled corpus of
//! the local solver (`executor::local::BUNDLED_CORPUS`), in `helix serve` and the solver function.

use std::fmt::Write;

fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus");
    println!("cargo:rerun-if-changed={}", dir.display());
    // A missing or empty corpus is a build error, never a binary that silently knows nothing.
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading the sample corpus {}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    assert!(!names.is_empty(), "the sample corpus {} has no .md file", dir.display());
    names.sort();
    let mut out = String::from("[");
    for path in names {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        writeln!(out, "({name:?}, include_str!({:?})),", path.canonicalize().unwrap().display().to_string()).unwrap();
    }
    out.push(']');
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("corpus.rs");
    std::fs::write(dest, out).unwrap();
}
