//! A scenario cannot write outside its results directory: a case named `../../x` (which used to
//! put its configs and logs in `<root>/<scenario>/x`) is refused with file:line, exit 2, before
//! anything is written.

use std::process::Command;

#[test]
fn a_case_named_dot_dot_slash_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let default = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/default.toml"),
    )
    .unwrap();
    let mut text = default.replace("name = \"default\"", "name = \"esc\"");
    let line = text.lines().count() + 2;
    text.push_str("\n[[cases]]\nname = \"../../x\"\n");
    let file = dir.path().join("esc.toml");
    std::fs::write(&file, &text).unwrap();
    let root = dir.path().join("r");
    let out = Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .args(["run", "--no-progress", "--results"])
        .arg(&root)
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "proxybench: {}:{line}: case name '../../x' must not contain '/' (it becomes a directory name under the results)",
            file.display()
        )
    );
    assert!(!root.exists(), "{} was created", root.display());
    let entries: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, ["esc.toml"]);
}
