//! Headless Chromium, for the tests that check what a report page shows once its scripts ran.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Finds Chromium, installing it with `.ci/install-chromium` (under `repo`) when it is missing.
/// `None` only when it cannot be installed here; CI sets TOOLRUN_REQUIRE_BROWSER so it never
/// skips.
pub fn chromium(repo: &Path) -> Option<PathBuf> {
    let find = || {
        ["chromium", "chromium-browser"].iter().find_map(|name| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|p| p.join(name))
                    .find(|p| p.is_file())
            })
        })
    };
    if let Some(p) = find() {
        return Some(p);
    }
    let script = repo.join(".ci/install-chromium");
    let installed = Command::new("bash").arg(&script).status();
    if let Some(p) = find() {
        return Some(p);
    }
    let why = format!(
        "Chromium is not installed and `{}` could not install it ({installed:?})",
        script.display()
    );
    if std::env::var_os("TOOLRUN_REQUIRE_BROWSER").is_some() {
        panic!("{why}");
    }
    eprintln!("\n!!!!!!!!\nSKIPPED the browser test: {why}\n!!!!!!!!\n");
    None
}

/// The DOM after the page's scripts ran, as headless Chromium sees it from `file://`.
pub fn rendered_dom(browser: &Path, page: &Path, fragment: &str) -> String {
    let profile = crate::temp_dir("chromium-profile");
    let url = format!("file://{}{fragment}", page.display());
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-dev-shm-usage",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .arg("--dump-dom")
    .arg(url);
    let out = crate::run(&mut cmd);
    let _ = std::fs::remove_dir_all(&profile);
    assert_eq!(out.code, 0, "chromium failed: {out:?}");
    out.stdout
}
