//! The built-in presets, embedded from `policies/`. A test checks that
//! every file in `policies/` is registered here and parses.

/// (name, text) for every preset; `extends = ["NAME"]` and `--preset NAME`
/// refer to these names.
pub const PRESETS: &[(&str, &str)] = &[
    ("default", include_str!("../../policies/default.toml")),
    ("rust", include_str!("../../policies/rust.toml")),
    ("node", include_str!("../../policies/node.toml")),
    ("python", include_str!("../../policies/python.toml")),
    ("ci-cache", include_str!("../../policies/ci-cache.toml")),
];

pub fn get(name: &str) -> Option<&'static str> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// How rules from a preset name their source in origins and diagnostics.
pub fn source_name(name: &str) -> String {
    format!("policies/{name}.toml")
}
