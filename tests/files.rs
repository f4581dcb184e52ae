//! Issue 12 §3 (and the fixture message of §6): files are written without following planted
//! symlinks, only regular files are read, and paths in specs and fixtures stay inside the
//! project root. Through the real binary.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;
use support::{temp_dir, toolrun, write};

const SPEC: &str = "version: 1\nname: files\ndescription: Answers from a script.\n\
tools:\n  echo:\n    description: Echoes back a fixed value.\n    kind: mock\n    responses:\n      - result: 1\n\
models:\n  s:\n    kind: scripted\n    scripts:\n      - turns:\n          - tool_calls: [{ name: echo, arguments: {} }]\n          - answer: done\n";

fn run(cmd: &mut std::process::Command) -> support::Output {
    support::run_with_timeout(cmd, None, Duration::from_secs(30))
}

/// A project: `root/.git`, `root/specs/x.yaml`, and a fixture recorded at `root/fixtures/y.json`.
fn project() -> (support::TempDir, PathBuf, PathBuf) {
    let root = temp_dir("files_project");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    let spec = write(&root.join("specs"), "x.yaml", SPEC);
    let fixture = root.join("fixtures").join("y.json");
    std::fs::create_dir_all(fixture.parent().unwrap()).unwrap();
    run(toolrun()
        .arg("run")
        .arg(&spec)
        .args(["--query", "q", "--record"])
        .arg(&fixture))
    .assert_success();
    (root, spec, fixture)
}

fn with_fixture(spec: &Path, fixture: &str) -> String {
    let text = std::fs::read_to_string(spec).unwrap();
    format!("{text}tests:\n  - name: recorded\n    query: q\n    fixture: {fixture}\n")
}

#[test]
fn a_device_named_as_a_spec_is_called_a_device() {
    let out = run(toolrun().args(["check", "/dev/zero"]));
    out.assert_code(2);
    assert!(out.stderr.contains("character device"), "{}", out.stderr);
    assert!(!out.stderr.contains("larger than"), "{}", out.stderr);
}

#[cfg(unix)]
#[test]
fn fifos_are_refused_at_once_as_spec_fixture_and_test_fixture() {
    let (root, spec, _) = project();
    let fifo = root.join("specs").join("pipe.yaml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !matches!(made, Ok(s) if s.success()) {
        eprintln!("mkfifo unavailable; skipping");
        return;
    }
    // Nobody writes to these pipes: reading one would hang until the timeout.
    let out = run(toolrun().arg("check").arg(&fifo));
    out.assert_code(2);
    assert!(out.stderr.contains("named pipe"), "{}", out.stderr);

    let out = run(toolrun().arg("replay").arg(&fifo));
    out.assert_code(2);
    assert!(out.stderr.contains("named pipe"), "{}", out.stderr);

    let text = with_fixture(&spec, "pipe.yaml");
    let with = write(&root.join("specs"), "with_pipe.yaml", &text);
    let out = run(toolrun().arg("check").arg(&with));
    out.assert_code(1);
    assert!(
        out.stderr.contains("E036") && out.stderr.contains("named pipe"),
        "{}",
        out.stderr
    );

    let dir = run(toolrun().arg("check").arg(root.join("specs")));
    assert_ne!(dir.code, 0);
}

#[cfg(unix)]
#[test]
fn outputs_replace_a_symlink_at_the_destination_instead_of_writing_through_it() {
    let dir = temp_dir("files_symlink");
    let spec = write(&dir, "spec.yaml", SPEC);
    let victim = write(&dir, "victim.txt", "keep me");
    for (flag, name) in [
        ("--trace", "trace.json"),
        ("--events", "events.jsonl"),
        ("--record", "fixture.json"),
    ] {
        let target = dir.join(name);
        std::os::unix::fs::symlink(&victim, &target).unwrap();
        run(toolrun()
            .arg("run")
            .arg(&spec)
            .args(["--query", "q", flag])
            .arg(&target)
            .args(["--record-mode", "all"]))
        .assert_success();
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "keep me",
            "{flag}"
        );
        let meta = std::fs::symlink_metadata(&target).unwrap();
        assert!(meta.is_file(), "{flag} left {meta:?}");
        assert!(std::fs::read_to_string(&target).unwrap().contains("{"));
    }
    // No temporary files are left behind.
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn test_fixtures_stay_inside_the_project_root() {
    let (root, spec, _) = project();
    let specs = root.join("specs");
    // `specs/x.yaml` naming `../fixtures/y.json` is the usual layout.
    let ok = write(
        &specs,
        "ok.yaml",
        &with_fixture(&spec, "../fixtures/y.json"),
    );
    run(toolrun().arg("check").arg(&ok)).assert_success();
    run(toolrun().arg("test").arg(&ok)).assert_success();

    let outside = write(&root.join(".."), "outside.json", "{}");
    let name = outside.file_name().unwrap().to_string_lossy().into_owned();
    for (fixture, says) in [
        ("/etc/passwd".to_string(), "absolute path"),
        (format!("../../{name}"), "outside the project root"),
        (
            "../../../../../../../../../../etc/passwd".into(),
            "outside the project root",
        ),
    ] {
        let bad = write(&specs, "bad.yaml", &with_fixture(&spec, &fixture));
        let out = run(toolrun().arg("check").arg(&bad));
        out.assert_code(1);
        assert!(
            out.stderr.contains("E036") && out.stderr.contains(says),
            "{fixture}\n{}",
            out.stderr
        );
    }

    // Without `.git` the root is the spec's own folder; `--root` widens it.
    std::fs::remove_dir_all(root.join(".git")).unwrap();
    run(toolrun().arg("check").arg(&ok)).assert_code(1);
    run(toolrun().arg("check").arg(&ok).arg("--root").arg(&root)).assert_success();
}

#[test]
fn table_files_may_sit_anywhere_inside_the_root() {
    let (root, _, _) = project();
    write(&root.join("data"), "t.csv", "id,name\n1,Ann\n");
    let spec = "version: 1\nname: t\ndescription: Reads a table.\ntools:\n  t:\n    description: Looks rows up in the table.\n    kind: table\n    file: ../data/t.csv\n";
    let spec = write(&root.join("specs"), "t.yaml", spec);
    run(toolrun().arg("check").arg(&spec)).assert_success();
}

#[test]
fn replay_refuses_a_fixture_whose_spec_path_leaves_the_root() {
    let (root, _, fixture) = project();
    run(toolrun().arg("replay").arg(&fixture)).assert_success();
    let original = std::fs::read_to_string(&fixture).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&original).unwrap();
    assert_eq!(doc["spec"]["path"], "../specs/x.yaml");

    for path in ["/etc/passwd", "../../../../../../../../../../etc/passwd"] {
        doc["spec"]["path"] = path.into();
        let tampered = write(&root.join("fixtures"), "t.json", &doc.to_string());
        let out = run(toolrun().arg("replay").arg(&tampered));
        assert_ne!(out.code, 0, "{out:?}");
        let both = format!("{}{}", out.stdout, out.stderr);
        assert!(
            both.contains("absolute path") || both.contains("outside the project root"),
            "{path}\n{both}"
        );
        assert!(!both.contains("root:x:0"), "{both}");
    }
}

#[test]
fn a_fractional_format_version_is_reported_as_written() {
    let (root, _, fixture) = project();
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    doc["format_version"] = serde_json::json!(1.5);
    let tampered = write(&root.join("fixtures"), "v.json", &doc.to_string());
    let out = run(toolrun().arg("replay").arg(&tampered));
    out.assert_code(2);
    let both = format!("{}{}", out.stdout, out.stderr);
    assert!(both.contains("format_version 1.5"), "{both}");
    assert!(!both.contains("format_version 0"), "{both}");
}

#[test]
fn import_and_report_refuse_fifos_and_devices() {
    // Issue 25 §8: both used to hang on a FIFO and read `/dev/zero` until memory ran out.
    let dir = temp_dir("import-report-fifo");
    let fifo = dir.join("doc.yaml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !matches!(made, Ok(s) if s.success()) {
        eprintln!("mkfifo unavailable; skipping");
        return;
    }
    for input in [fifo.as_path(), Path::new("/dev/zero")] {
        let out = run(toolrun().args(["import", "openapi"]).arg(input));
        out.assert_code(2);
        assert!(
            out.stderr.contains("named pipe") || out.stderr.contains("device"),
            "{}",
            out.stderr
        );
        let html = dir.join("r.html");
        let out = run(toolrun().arg("report").arg(input).arg("-o").arg(&html));
        out.assert_code(2);
        assert!(
            out.stderr.contains("named pipe") || out.stderr.contains("device"),
            "{}",
            out.stderr
        );
    }
}

/// The files `pid` has open inside `dir` and has written to, as /proc names them (a file with
/// no name shows as `dir/#inode (deleted)`). Written to: the check that the folder is writable
/// opens a file there too, and writes nothing.
#[cfg(target_os = "linux")]
fn writing_in(pid: u32, dir: &Path) -> Vec<PathBuf> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.flatten()
        .filter_map(|fd| {
            let target = std::fs::read_link(fd.path()).ok()?;
            let info = std::fs::read_to_string(format!(
                "/proc/{pid}/fdinfo/{}",
                fd.file_name().to_string_lossy()
            ))
            .ok()?;
            let written = info
                .lines()
                .find_map(|l| l.strip_prefix("pos:"))
                .is_some_and(|pos| pos.trim() != "0");
            (target.starts_with(dir) && written).then_some(target)
        })
        .collect()
}

/// Issue 36 §19: a write killed midway left `.NAME.<hex>.tmp` beside the file, where `git add .`
/// takes it. `report -o` of a large results file is SIGKILLed while it has written to a file in
/// the output folder (seen in /proc), and the folder must then be empty.
#[cfg(target_os = "linux")]
#[test]
fn a_write_killed_midway_leaves_nothing_beside_its_file() {
    let dir = temp_dir("killed-write");
    write(
        &dir,
        "s.yaml",
        &format!("{SPEC}tests:\n  - name: t\n    query: q\n"),
    );
    run(toolrun()
        .current_dir(&dir)
        .args(["test", "s.yaml", "--results", "small.json"]))
    .assert_success();
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("small.json")).unwrap()).unwrap();
    // Large enough that writing the page takes a while: the kill lands inside the write.
    doc["tests"][0]["attempts"][0]["answer"] = "x".repeat(24 << 20).into();
    std::fs::write(dir.join("big.json"), doc.to_string()).unwrap();
    let out_dir = dir.join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out_dir = out_dir.canonicalize().unwrap();
    let mut caught = Vec::new();
    for _ in 0..5 {
        let mut child = toolrun()
            .current_dir(&dir)
            .args(["report", "big.json", "-o"])
            .arg(out_dir.join("report.html"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(120) {
            caught = writing_in(child.id(), &out_dir);
            if !caught.is_empty() {
                child.kill().unwrap();
                break;
            }
        }
        child.wait().unwrap();
        if !caught.is_empty() {
            break;
        }
        // It finished before it was caught writing: start again on an empty folder.
        for entry in std::fs::read_dir(&out_dir).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
    }
    assert!(
        !caught.is_empty(),
        "never caught writing in the output folder"
    );
    let left: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        left.is_empty(),
        "killed while writing {caught:?}, it left {left:?}"
    );
}
