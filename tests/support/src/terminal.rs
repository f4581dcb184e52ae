//! The binary on a pseudo-terminal: `script` (util-linux, in every Debian base system) gives it
//! a real one, so it behaves as it does for a person (y/N questions, Ctrl-C, progress bars).
//! `tests/support/mod.rs` wraps [`Terminal::start`] and [`in_terminal`] with the binary's path.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How long [`Terminal::wait_for`] and [`Terminal::wait_exit`] wait: only a hang reaches it.
const PATIENCE: Duration = Duration::from_secs(120);

/// `bin ARGS` on a pseudo-terminal, driven as a person would: its screen is read as it is
/// drawn, and keys are typed when asked for.
pub struct Terminal {
    child: Child,
    stdin: Option<ChildStdin>,
    screen: Arc<Mutex<Vec<u8>>>,
    reader: Option<JoinHandle<()>>,
}

impl Terminal {
    /// Starts `bin ARGS` in `dir` on a pseudo-terminal, with this process's environment less
    /// `CI` (which stops every login question) plus `NO_COLOR=1` and `envs`.
    pub fn start(bin: &Path, dir: &Path, args: &[&str], envs: &[(&str, String)]) -> Terminal {
        let quote = |a: &str| format!("'{}'", a.replace('\'', r"'\''"));
        let mut command = quote(&bin.to_string_lossy());
        for a in args {
            command.push(' ');
            command.push_str(&quote(a));
        }
        let mut script = Command::new("script");
        script
            .args(["-qec", &command, "/dev/null"])
            .current_dir(dir)
            .env_remove("CI")
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in envs {
            script.env(k, v);
        }
        let mut child = script.spawn().expect("`script` runs (util-linux)");
        let stdin = child.stdin.take();
        let mut out = child.stdout.take().expect("stdout");
        let screen = Arc::new(Mutex::new(Vec::new()));
        let sink = screen.clone();
        let reader = thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Terminal {
            child,
            stdin,
            screen,
            reader: Some(reader),
        }
    }

    /// The process id of `script`; the binary runs below it (see `toolrun_below`).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Everything written to the terminal so far, escapes and all.
    pub fn raw(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    /// Waits until `text` was written (a generous bound only catches a hang).
    #[track_caller]
    pub fn wait_for(&self, text: &str) {
        let end = Instant::now() + PATIENCE;
        while !self.raw().contains(text) {
            let ended = self.child_ended();
            assert!(!ended, "ended before showing {text}:\n{}", self.raw());
            assert!(Instant::now() < end, "never shown: {text}\n{}", self.raw());
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn child_ended(&self) -> bool {
        // The reader ends with the terminal: everything was written.
        self.reader.as_ref().is_none_or(|r| r.is_finished())
    }

    pub fn type_keys(&mut self, keys: &str) {
        let stdin = self.stdin.as_mut().expect("stdin");
        stdin.write_all(keys.as_bytes()).expect("typed");
        stdin.flush().expect("typed");
    }

    /// Waits, the input still open, until the program exits (a generous bound only catches a
    /// hang, saying `what` did not happen); its exit code, -1 if a signal ended it.
    #[track_caller]
    pub fn wait_exit(&mut self, what: &str) -> i32 {
        let end = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().expect("script") {
                return status.code().unwrap_or(-1);
            }
            assert!(Instant::now() < end, "{what}\n{}", self.raw());
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Ends the input and waits for the exit: its code, and the screen as a terminal shows it.
    pub fn finish(self) -> (i32, String) {
        let (code, raw) = self.finish_raw();
        (code, rendered(&raw))
    }

    /// Ends the input and waits for the exit: its code, and all that was written, escapes and
    /// all.
    pub fn finish_raw(mut self) -> (i32, String) {
        drop(self.stdin.take());
        let status = self.child.wait().expect("script ends");
        if let Some(reader) = self.reader.take() {
            reader.join().expect("reader");
        }
        (status.code().unwrap_or(-1), self.raw())
    }
}

/// `bin ARGS` in `dir` on a pseudo-terminal (see [`Terminal::start`]) with `input` typed at
/// once and then the input ended: its exit code and all it wrote, escapes and all.
pub fn in_terminal(
    bin: &Path,
    dir: &Path,
    args: &[&str],
    envs: &[(&str, String)],
    input: &str,
) -> (i32, String) {
    let mut term = Terminal::start(bin, dir, args, envs);
    term.type_keys(input);
    term.finish_raw()
}

/// What a terminal shows after `raw` was written to it: text, `\r`, `\n`, cursor moves and
/// line clearing (what a progress bar writes), other escapes dropped.
pub fn rendered(raw: &str) -> String {
    let mut lines: Vec<Vec<char>> = vec![Vec::new()];
    let (mut row, mut col) = (0usize, 0usize);
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => col = 0,
            '\n' => row += 1,
            '\x1b' if chars.peek() == Some(&'[') => {
                chars.next();
                let mut param = String::new();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() || c == '~' {
                        last = c;
                        break;
                    }
                    param.push(c);
                }
                let n: usize = param.parse().unwrap_or(1).max(1);
                while lines.len() <= row {
                    lines.push(Vec::new());
                }
                match last {
                    'A' => row = row.saturating_sub(n),
                    'B' => row += n,
                    'C' => col += n,
                    'D' => col = col.saturating_sub(n),
                    'K' if param == "2" => lines[row].clear(),
                    'K' => lines[row].truncate(col),
                    _ => {}
                }
            }
            c if c.is_control() => {}
            c => {
                while lines.len() <= row {
                    lines.push(Vec::new());
                }
                let line = &mut lines[row];
                while line.len() <= col {
                    line.push(' ');
                }
                line[col] = c;
                col += 1;
            }
        }
    }
    let lines: Vec<String> = lines.iter().map(|l| l.iter().collect()).collect();
    lines.join("\n")
}
