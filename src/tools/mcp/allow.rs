//! What a stdio MCP server may start: the person running toolrun decides, never the spec. The
//! command line allows a program (`--allow-exec`, any arguments) or a whole command line
//! (`--allow-command`, exactly those arguments), matched by the file it runs, never by how it
//! is spelled; and a spec's `env:` may not set what chooses the code the program runs (a loader,
//! interpreter or search-path variable) unless the command line names it (`--allow-env`).

pub(crate) use crate::net::exec_env::chooses_code;
use crate::net::ExecRules;
use crate::registry::StdioCommand;
use std::path::{Path, PathBuf};

/// Why a server does not start.
pub(crate) enum Refusal {
    NotAllowed,
    NotFound,
    /// The spec's `env:` sets this variable, which chooses what code runs.
    Env(String),
}

/// The program a `--allow-exec` entry or a spec's `command:` names: a path as it is (relative
/// to `dir`), a bare name looked up on `PATH`, as `execvp` would, but in absolute entries only:
/// a relative entry (`.`, `node_modules/.bin`, an empty one) would find the project's own files.
/// Not made canonical: a program may care how it was called (a venv's `python` is a symlink
/// that finds its venv that way).
pub(crate) fn resolve(
    program: &str,
    dir: &Path,
    path_var: Option<&std::ffi::OsStr>,
) -> Option<PathBuf> {
    if program.is_empty() {
        return None;
    }
    if program.contains('/') {
        let p = dir.join(program);
        return is_executable(&p).then_some(p);
    }
    std::env::split_paths(path_var?)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

/// `PATH` without its relative entries, for the server: what it looks up must not be found in
/// the folder it runs in, the project.
pub(crate) fn absolute_path(path_var: &std::ffi::OsStr) -> std::ffi::OsString {
    let kept = std::env::split_paths(path_var).filter(|d| d.is_absolute());
    std::env::join_paths(kept).unwrap_or_default()
}

#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(p: &Path) -> bool {
    p.is_file()
}

/// Whether the command line lets `cmd` start, and the file it runs. An entry names the program
/// when both resolve to the same file: the spec's program against the project root and `PATH`,
/// the entry against the current folder and `PATH` (`--allow-exec npx` and `--allow-exec
/// /usr/bin/npx` both allow `command: [npx, ...]` when that is what `PATH` finds; `--allow-exec
/// ./server` allows the file `./server` is here, whatever the spec calls it). Then its `env:`
/// may set nothing [`chooses_code`] names that `--allow-env` does not.
pub(crate) fn admitted(cmd: &StdioCommand, rules: &ExecRules) -> Result<PathBuf, Refusal> {
    let path_var = std::env::var_os("PATH");
    let Some(file) = resolve(&cmd.argv[0], &cmd.dir, path_var.as_deref()) else {
        return Err(Refusal::NotFound);
    };
    let here = std::env::current_dir().unwrap_or_default();
    // Two spellings of one file compare equal.
    let canonical = file.canonicalize().ok();
    let same_file = |entry: &str| {
        canonical.is_some()
            && resolve(entry, &here, path_var.as_deref()).and_then(|p| p.canonicalize().ok())
                == canonical
    };
    let allowed = rules.programs.iter().any(|p| same_file(p))
        || rules
            .commands
            .iter()
            .filter_map(|line| line.split_first())
            .any(|(program, args)| args == &cmd.argv[1..] && same_file(program));
    if !allowed {
        return Err(Refusal::NotAllowed);
    }
    let refused = cmd
        .env
        .iter()
        .map(|(name, _)| name)
        .find(|name| chooses_code(name) && !rules.env.iter().any(|a| a == *name));
    match refused {
        Some(name) => Err(Refusal::Env(name.clone())),
        None => Ok(file),
    }
}

/// A command line as a POSIX shell splits it into words, without running or expanding anything:
/// blanks separate words, `'...'` keeps everything as written, `"..."` keeps all but `\"`, `\\`,
/// `` \` `` and `\$`, and a backslash elsewhere keeps the next character.
pub(crate) fn split_command_line(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => words.extend(word.take()),
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("a `'` is not closed".into()),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => w.push(c),
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => return Err("a `\"` is not closed".into()),
                        },
                        Some(c) => w.push(c),
                        None => return Err("a `\"` is not closed".into()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(c) => word.get_or_insert_with(String::new).push(c),
                None => return Err("it ends with a lone `\\`".into()),
            },
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    if words.is_empty() {
        return Err("it names no program".into());
    }
    Ok(words)
}

/// The line [`split_command_line`] splits into `argv`: each word in double quotes when it
/// needs them.
pub(crate) fn join_command_line(argv: &[String]) -> String {
    let quoted = argv.iter().map(|w| {
        let plain = !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+%".contains(c));
        if plain {
            return w.clone();
        }
        let mut q = String::from('"');
        for c in w.chars() {
            if matches!(c, '"' | '\\' | '$' | '`') {
                q.push('\\');
            }
            q.push(c);
        }
        q.push('"');
        q
    });
    quoted.collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_resolve_on_absolute_path_entries_and_against_the_folder() {
        let dir = std::env::temp_dir();
        let sh = resolve(
            "sh",
            &dir,
            Some(std::ffi::OsStr::new("/nonexistent:/bin:/usr/bin")),
        );
        assert!(sh.is_some_and(|p| p.is_absolute()));
        assert_eq!(
            resolve("sh", &dir, Some(std::ffi::OsStr::new("/nonexistent"))),
            None
        );
        assert_eq!(resolve("", &dir, None), None);
        assert!(resolve("/bin/sh", &dir, None).is_some());
        // `/` as a relative entry would find `/bin/sh`; it is not searched.
        assert_eq!(resolve("sh", Path::new("/"), Some("bin".as_ref())), None);
        assert_eq!(
            absolute_path("bin:/usr/bin::.:/bin".as_ref()),
            std::ffi::OsString::from("/usr/bin:/bin")
        );
    }

    #[test]
    fn command_lines_split_as_a_shell_splits_them() {
        let split = |s: &str| split_command_line(s).unwrap();
        assert_eq!(
            split("node  server.js --port 3"),
            ["node", "server.js", "--port", "3"]
        );
        assert_eq!(
            split(r#"npx -c 'a b' "c \"d\" \n" e\ f ''"#),
            ["npx", "-c", "a b", r#"c "d" \n"#, "e f", ""]
        );
        assert!(split_command_line("a 'b").is_err());
        assert!(split_command_line("a \"b").is_err());
        assert!(split_command_line("  ").is_err());
        let argv: Vec<String> = ["node", "my server.js", "", "a\"b$c`d\\e'f", "--x=1"]
            .map(String::from)
            .to_vec();
        assert_eq!(split(&join_command_line(&argv)), argv);
    }

    #[test]
    fn loader_interpreter_and_search_path_variables_choose_code() {
        for name in [
            "LD_PRELOAD",
            "NODE_OPTIONS",
            "PATH",
            "PYTHONPATH",
            "PYTHONSTARTUP",
            "PYTHONWARNINGS",
            "BASH_ENV",
            "npm_config_node_options",
            "BASH_FUNC_ls%%",
            "GIT_SSH_COMMAND",
        ] {
            assert!(chooses_code(name), "{name}");
        }
        for name in [
            "GITHUB_TOKEN",
            "LOG_LEVEL",
            "NODE_ENV",
            "PYTHONUNBUFFERED",
            "DEBUG",
        ] {
            assert!(!chooses_code(name), "{name}");
        }
    }
}
