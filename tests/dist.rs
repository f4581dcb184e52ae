//! What users install (issue 26), built and installed as they would: the crate package
//! (`cargo package`: what crates.io gets), and from it the manylinux2014 wheel
//! (`maturin build --release --zig`, glibc 2.17), installed with pip into a fresh venv, with
//! `uv tool install`, and by the GitHub Action's script. Each installed toolrun answers
//! `--version` and passes the example specs' tests.
//!
//! Building the wheel from the unpacked package is also the package's verification build (what
//! `cargo install toolrun` compiles, in the same release profile), so CI pays for one release
//! build, not two: fat LTO with one codegen unit, about 400 s of CPU from cold (see
//! docs/performance.md). It goes into a target directory of its own under
//! `CARGO_TARGET_TMPDIR`, reused while the sources are unchanged (cargo decides); the pinned
//! maturin, zig and uv come from `tests/dist/requirements.txt`.

#[path = "mcp/python.rs"]
mod python;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use support::{run, run_with_timeout, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tmp() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dist")
}

/// The venv with maturin, ziglang, uv, actionlint and check-jsonschema: its `bin/`.
fn tools() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let python = python::venv("dist-venv", "tests/dist/requirements.txt");
        python.parent().unwrap().to_path_buf()
    })
    .clone()
}

/// A release build is slow on a small machine; give it time, but never hang.
const BUILD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(50 * 60);

/// `PATH` for the build tools: the venv first (maturin finds `python -m ziglang` there).
fn tools_path() -> String {
    format!(
        "{}:{}",
        tools().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The manylinux2014 x86_64 wheel, built once per test process.
fn wheel() -> PathBuf {
    static WHEEL: OnceLock<PathBuf> = OnceLock::new();
    WHEEL.get_or_init(build_wheel).clone()
}

fn build_wheel() -> PathBuf {
    let (_, unpacked) = package();
    let out_dir = tmp().join("wheels");
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = run_with_timeout(
        Command::new(tools().join("maturin"))
            .current_dir(&unpacked)
            .env("PATH", tools_path())
            .args(["build", "--release", "--locked", "--zig"])
            .args(["--compatibility", "manylinux2014"])
            .args(["--target", "x86_64-unknown-linux-gnu"])
            .args(["--compression-level", "9"])
            .arg("--target-dir")
            .arg(tmp().join("wheel-target"))
            .arg("--out")
            .arg(&out_dir),
        None,
        BUILD_TIMEOUT,
    );
    assert_eq!(
        out.code, 0,
        "maturin build failed:\n{}\n{}",
        out.stdout, out.stderr
    );
    let wheels: Vec<PathBuf> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    assert_eq!(wheels.len(), 1, "{wheels:?}\n{}", out.stderr);
    wheels[0].clone()
}

/// The example specs, as `toolrun test` takes them.
fn example_specs() -> Vec<PathBuf> {
    let mut specs: Vec<PathBuf> = std::fs::read_dir(repo().join("specs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| p.strip_prefix(repo()).unwrap().to_path_buf())
        .collect();
    specs.sort();
    assert!(specs.len() >= 5, "{specs:?}");
    specs
}

/// An installed toolrun answers `--version` and passes every example spec's tests, run from
/// the repository as a user's CI would (offline: scripted models and recorded fixtures).
fn assert_installed_toolrun_works(bin: &Path) {
    let mut cmd = support::clean_command(bin);
    let out = run(cmd.arg("--version"));
    out.assert_success();
    assert_eq!(
        out.stdout.trim(),
        format!("toolrun {}", env!("CARGO_PKG_VERSION"))
    );
    let cache = support::temp_dir("dist-cache");
    let mut cmd = support::clean_command(bin);
    let out = run(cmd
        .current_dir(repo())
        .env("TOOLRUN_CACHE_DIR", cache.path())
        .args(["test", "--jobs", "2"])
        .args(example_specs()));
    out.assert_success();
    let last = out.stdout.lines().last().unwrap_or("");
    assert!(
        last.ends_with(" passed, 0 failed") && !last.starts_with("0 "),
        "{}",
        out.stdout
    );
}

/// The highest `GLIBC_2.N` symbol version a binary asks for.
fn newest_glibc(binary: &[u8]) -> u32 {
    let needle = b"GLIBC_2.";
    binary
        .windows(needle.len() + 2)
        .filter(|w| w.starts_with(needle))
        .filter_map(|w| {
            let digits: String = w[needle.len()..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .map(|&b| b as char)
                .collect();
            digits.parse().ok()
        })
        .max()
        .unwrap_or(0)
}

fn python_json(code: &str, arg: &Path) -> serde_json::Value {
    let out = run(Command::new("python3").args(["-c", code]).arg(arg));
    out.assert_success();
    serde_json::from_str(&out.stdout).unwrap()
}

#[test]
fn the_wheel_is_manylinux2014_small_and_holds_a_stripped_glibc_2_17_binary() {
    let wheel = wheel();
    let name = wheel.file_name().unwrap().to_string_lossy().to_string();
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        name.starts_with(&format!("toolrun-{version}-py3-none-"))
            && name.contains("manylinux_2_17_x86_64")
            && name.contains("manylinux2014_x86_64"),
        "{name}"
    );
    let size = std::fs::metadata(&wheel).unwrap().len();
    assert!(
        size <= 8_000_000,
        "the wheel is {size} bytes (at most 8 MB)"
    );
    // The binary inside: its size, and the newest glibc symbol it needs.
    let listing = python_json(
        "import json,sys,zipfile; z=zipfile.ZipFile(sys.argv[1]); \
         print(json.dumps({i.filename: i.file_size for i in z.infolist()}))",
        &wheel,
    );
    let listing = listing.as_object().unwrap();
    let (path, size) = listing
        .iter()
        .find(|(k, _)| k.ends_with(".data/scripts/toolrun"))
        .unwrap_or_else(|| panic!("no toolrun script in {listing:?}"));
    let size = size.as_u64().unwrap();
    // 20 MB since the OAuth client and resource server, MCP 2026-07-28 both ways and `chat` (18.01 MB).
    assert!(size <= 20_000_000, "{path} is {size} bytes (at most 20 MB)");
    assert!(
        !listing
            .keys()
            .any(|k| k.contains("fixtures/") || k.contains("fuzz/")),
        "{listing:?}"
    );
    let dir = support::temp_dir("wheel-unpacked");
    let out = run(Command::new("python3")
        .args([
            "-c",
            "import sys,zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])",
        ])
        .arg(&wheel)
        .arg(path)
        .arg(dir.path()));
    out.assert_success();
    let binary = std::fs::read(dir.path().join(path)).unwrap();
    assert_eq!(
        newest_glibc(&binary),
        17,
        "manylinux2014 allows glibc 2.17 symbols at most"
    );
    assert!(
        !binary.windows(7).any(|w| w == b".symtab"),
        "the binary is not stripped"
    );
}

#[test]
fn pip_installs_the_wheel_into_a_fresh_venv() {
    let dir = support::temp_dir("pip-venv");
    let venv = dir.path().join("venv");
    run(Command::new("python3").args(["-m", "venv"]).arg(&venv)).assert_success();
    // `--no-index`: the wheel has no dependencies, and nothing is fetched.
    run(Command::new(venv.join("bin/pip"))
        .args([
            "install",
            "--quiet",
            "--no-index",
            "--disable-pip-version-check",
        ])
        .arg(wheel()))
    .assert_success();
    assert_installed_toolrun_works(&venv.join("bin/toolrun"));
}

#[test]
fn uv_tool_install_installs_the_wheel() {
    let dir = support::temp_dir("uv-tool");
    let bin_dir = dir.path().join("bin");
    let out = run(Command::new(tools().join("uv"))
        .args(["tool", "install", "--offline", "--no-python-downloads"])
        .arg(wheel())
        .env("UV_TOOL_DIR", dir.path().join("tools"))
        .env("UV_TOOL_BIN_DIR", &bin_dir)
        .env("UV_CACHE_DIR", dir.path().join("cache"))
        .env("UV_PYTHON", "python3")
        .env("UV_NO_CONFIG", "1"));
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_installed_toolrun_works(&bin_dir.join("toolrun"));
}

#[test]
fn the_action_installs_the_wheel_with_pip_when_toolrun_is_not_on_path() {
    let wheel = wheel();
    let dir = support::temp_dir("action-pip");
    let runner = dir.path().join("runner");
    std::fs::create_dir_all(&runner).unwrap();
    let (summary, outputs) = (runner.join("summary.md"), runner.join("outputs.txt"));
    let out: Output = run(Command::new("bash")
        .arg(repo().join("scripts/action.sh"))
        .current_dir(repo())
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir.path())
        .env("TOOLRUN_CACHE_DIR", dir.path().join("cache"))
        .env("RUNNER_TEMP", &runner)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("GITHUB_OUTPUT", &outputs)
        // pip reads its options from the environment: the built wheel, no index.
        .env("PIP_NO_INDEX", "1")
        .env("PIP_FIND_LINKS", wheel.parent().unwrap())
        .env("INPUT_VERSION", env!("CARGO_PKG_VERSION"))
        .env(
            "INPUT_SPECS",
            "specs/stock_assistant.yaml specs/guardrails.yaml",
        ));
    out.assert_success();
    let venv_toolrun = runner.join("toolrun-action-venv/bin/toolrun");
    assert!(
        out.stdout.contains(&format!(
            "Using toolrun {} from {}",
            env!("CARGO_PKG_VERSION"),
            venv_toolrun.display()
        )),
        "{}",
        out.stdout
    );
    // Each output in the `name<<DELIMITER` form (tests/action.rs checks it in detail).
    let outputs = std::fs::read_to_string(&outputs).unwrap();
    let lines: Vec<&str> = outputs.lines().collect();
    let pairs: Vec<(&str, &str)> = lines
        .chunks(3)
        .map(|entry| {
            let (name, delimiter) = entry[0].split_once("<<").unwrap();
            assert_eq!(entry.get(2), Some(&delimiter), "{outputs}");
            (name, entry[1])
        })
        .collect();
    let results = runner.join("toolrun-results.json").display().to_string();
    assert_eq!(
        pairs,
        [("results", results.as_str()), ("exit-code", "0")],
        "{outputs}"
    );
    let summary = std::fs::read_to_string(&summary).unwrap();
    assert!(summary.starts_with("### toolrun report"), "{summary}");
}

/// The `.crate` file `cargo package` makes, unpacked; made once per test process.
fn package() -> (PathBuf, PathBuf) {
    static PACKAGE: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    PACKAGE
        .get_or_init(|| {
            let target = tmp().join("package-target");
            // `--no-verify`: building the wheel from the unpacked package is the verification build.
            // `--allow-dirty`: a developer's uncommitted work is what they are testing.
            let out = run_with_timeout(
                Command::new(env!("CARGO"))
                    .current_dir(repo())
                    .args(["package", "--locked", "--no-verify", "--allow-dirty"])
                    .arg("--target-dir")
                    .arg(&target),
                None,
                BUILD_TIMEOUT,
            );
            assert_eq!(out.code, 0, "cargo package:\n{}", out.stderr);
            let name = format!("toolrun-{}", env!("CARGO_PKG_VERSION"));
            let crate_file = target.join("package").join(format!("{name}.crate"));
            let unpacked = tmp().join("unpacked");
            let _ = std::fs::remove_dir_all(&unpacked);
            std::fs::create_dir_all(&unpacked).unwrap();
            run(Command::new("tar")
                .arg("-xzf")
                .arg(&crate_file)
                .arg("-C")
                .arg(&unpacked))
            .assert_success();
            (crate_file, unpacked.join(name))
        })
        .clone()
}

#[test]
fn the_crate_package_is_small_complete_and_leaves_test_data_out() {
    let (crate_file, unpacked) = package();
    let size = std::fs::metadata(&crate_file).unwrap().len();
    assert!(
        size < 10_000_000,
        "the package is {size} bytes (under 10 MB)"
    );
    for kept in [
        "src/main.rs",
        "Cargo.lock",
        "pyproject.toml",
        "README.md",
        "LICENSE-MIT",
        "LICENSE-APACHE",
        "specs/stock_assistant.yaml",
    ] {
        assert!(unpacked.join(kept).exists(), "{kept} is not in the package");
    }
    for left_out in ["tests", "fuzz/corpus", "benches", "fixtures", ".github"] {
        assert!(
            !unpacked.join(left_out).exists(),
            "{left_out} is in the package"
        );
    }
    let manifest = std::fs::read_to_string(unpacked.join("Cargo.toml")).unwrap();
    for key in [
        "description",
        "license",
        "repository",
        "homepage",
        "documentation",
        "readme",
        "keywords",
        "categories",
    ] {
        assert!(
            manifest
                .lines()
                .any(|l| l.starts_with(&format!("{key} = "))),
            "the package's Cargo.toml has no `{key}`"
        );
    }
}
