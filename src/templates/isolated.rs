//! Renders templates whose cost `cost` cannot bound in a child process: toolrun itself, run
//! again with a hidden first argument. A thread could not be stopped, and no allocator hook can
//! refuse memory without aborting the whole process; a child can be limited by the kernel
//! (address space and CPU time) and killed at any moment. No shell is involved: the child is
//! `current_exe()` with a fixed argument, an empty environment, the request on stdin and the
//! results on stdout.
//!
//! The child is killed as soon as the render's future is dropped, which is what the tool
//! timeout, `run_timeout` and Ctrl-C do; its own CPU limit ends it even if toolrun dies first.

use super::{RenderError, Templates};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// The hidden first argument that makes toolrun a template renderer.
pub const CHILD_ARG: &str = "__render-template";
/// Address space of a child, besides room for its input: far more than any template with a
/// purpose needs, small enough that a hostile one cannot hurt the machine.
pub(crate) const MEMORY_LIMIT: u64 = 128 << 20;
/// CPU seconds of a child: a backstop for when nobody is left to kill it (timeouts end it
/// sooner).
pub(crate) const CPU_LIMIT_SECS: u64 = 30;

static AVAILABLE: AtomicBool = AtomicBool::new(false);

/// Called by the toolrun binary: its own executable can render templates. Library users (fuzz
/// harnesses, benches) have no such child, and templates that need one fail with a limit error.
pub fn enable() {
    AVAILABLE.store(true, Ordering::Relaxed);
}

#[derive(Serialize, Deserialize)]
struct Request {
    /// (name, source): names keep the prefix that decides how values print.
    templates: Vec<(String, String)>,
    data: Value,
    /// Present for a URL template: strings are percent-encoded except these secrets.
    raw_secrets: Option<Vec<String>>,
}

#[derive(Serialize, Deserialize)]
struct Reply {
    results: Vec<Result<String, (String, bool)>>,
}

/// Renders `ids` over `ctx` in one child; each template's own outcome, or one error for all
/// when the child itself failed (a memory or CPU limit).
pub(crate) async fn render_many(
    templates: &Templates,
    ids: &[&str],
    ctx: &super::Ctx<'_>,
) -> Result<HashMap<String, Result<String, RenderError>>, RenderError> {
    if !AVAILABLE.load(Ordering::Relaxed) {
        return Err(RenderError::limit(
            "this template's cost cannot be bounded in advance, and only the toolrun executable can render it in a limited child process",
        ));
    }
    let request = Request {
        templates: ids
            .iter()
            .map(|id| (id.to_string(), templates.source_of(id).unwrap_or_default()))
            .collect(),
        data: ctx.json(),
        raw_secrets: ctx.raw_secrets.map(<[String]>::to_vec),
    };
    let input = serde_json::to_vec(&request).map_err(|e| RenderError::other(e.to_string()))?;
    let output = run_child(&input).await?;
    let reply: Reply = match output.status.success() {
        true => serde_json::from_slice(&output.stdout).map_err(|e| {
            RenderError::other(format!("the template renderer answered badly: {e}"))
        })?,
        false => return Err(child_failure(&output)),
    };
    Ok(ids
        .iter()
        .zip(reply.results)
        .map(|(id, r)| {
            let r = r.map_err(|(message, limit)| RenderError { message, limit });
            (id.to_string(), r)
        })
        .collect())
}

async fn run_child(input: &[u8]) -> Result<std::process::Output, RenderError> {
    let exe = std::env::current_exe()
        .map_err(|e| RenderError::other(format!("cannot find toolrun's executable: {e}")))?;
    let memory = MEMORY_LIMIT + 16 * input.len() as u64;
    let mut command = tokio::process::Command::new(exe);
    command
        .arg(CHILD_ARG)
        .arg(memory.to_string())
        .arg(CPU_LIMIT_SECS.to_string())
        .env_clear()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let spawn_error =
        |e: std::io::Error| RenderError::other(format!("cannot start the template renderer: {e}"));
    match input_file(input) {
        Some(file) => {
            command.stdin(file);
            command.output().await.map_err(spawn_error)
        }
        None => {
            use tokio::io::AsyncWriteExt;
            command.stdin(std::process::Stdio::piped());
            let mut child = command.spawn().map_err(spawn_error)?;
            if let Some(mut stdin) = child.stdin.take() {
                // The child reads all of its input before anything else.
                stdin.write_all(input).await.map_err(spawn_error)?;
            }
            child.wait_with_output().await.map_err(spawn_error)
        }
    }
}

/// The request in an in-memory file, so writing it can never meet a closed pipe (toolrun
/// keeps the default SIGPIPE action, which would end it) and never touches a disk (it holds
/// secrets). Elsewhere, or on a kernel without memfd (before 3.17), the request goes through a
/// pipe instead.
#[cfg(target_os = "linux")]
fn input_file(input: &[u8]) -> Option<std::fs::File> {
    use std::io::{Seek, Write};
    use std::os::fd::FromRawFd;
    // The raw system call, not glibc's `memfd_create` wrapper: that wrapper arrived in glibc
    // 2.27, and the manylinux2014 wheels link against glibc 2.17.
    // SAFETY: a plain system call with a static, NUL-terminated name; the descriptor it returns
    // is owned by the `File` from here on.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_memfd_create,
            c"toolrun-template".as_ptr(),
            libc::MFD_CLOEXEC,
        )
    };
    let Ok(fd) = std::os::fd::RawFd::try_from(fd) else {
        return None;
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(input).ok()?;
    file.rewind().ok()?;
    Some(file)
}

#[cfg(not(target_os = "linux"))]
fn input_file(_input: &[u8]) -> Option<std::fs::File> {
    None
}

fn child_failure(output: &std::process::Output) -> RenderError {
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stderr.contains("memory allocation") || stderr.contains("out of memory") {
        return RenderError::limit(format!(
            "the template needed more than {} MiB of memory",
            MEMORY_LIMIT >> 20
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        match output.status.signal() {
            Some(libc::SIGXCPU) | Some(libc::SIGKILL) => {
                return RenderError::limit(format!(
                    "the template used more than {CPU_LIMIT_SECS} s of CPU time"
                ))
            }
            Some(libc::SIGABRT) | Some(libc::SIGSEGV) => {
                return RenderError::limit(format!(
                    "the template needed more than {} MiB of memory",
                    MEMORY_LIMIT >> 20
                ))
            }
            _ => {}
        }
    }
    RenderError::other(format!(
        "the template renderer failed ({}): {}",
        output.status,
        stderr.chars().take(300).collect::<String>()
    ))
}

/// The child: `toolrun __render-template MEMORY CPU`. Limits itself first, then renders what
/// stdin asks for. Returns the process exit code.
pub fn child_main(args: &[String]) -> i32 {
    let number = |i: usize| args.get(i).and_then(|a| a.parse::<u64>().ok());
    let (Some(memory), Some(cpu)) = (number(0), number(1)) else {
        eprintln!("usage: toolrun {CHILD_ARG} MEMORY_BYTES CPU_SECONDS < request");
        return 2;
    };
    if let Err(e) = limit_self(memory, cpu) {
        eprintln!("cannot limit the template renderer: {e}");
        return 1;
    }
    let mut input = Vec::new();
    if std::io::Read::read_to_end(&mut std::io::stdin(), &mut input).is_err() {
        return 1;
    }
    let Ok(request) = serde_json::from_slice::<Request>(&input) else {
        eprintln!("the template request is not valid JSON");
        return 2;
    };
    drop(input);
    let mut templates = Templates::new();
    let ctx = match &request.raw_secrets {
        Some(raw) => super::Ctx::url(&request.data, raw),
        None => super::Ctx::new(&request.data),
    };
    let results = request
        .templates
        .iter()
        .map(|(name, source)| {
            templates
                .add_raw(name, source)
                .map_err(|e| (e, false))
                .and_then(|()| {
                    templates
                        .render_here(name, &ctx)
                        .map_err(|e| (e.message, e.limit))
                })
        })
        .collect();
    let reply = Reply { results };
    match serde_json::to_writer(std::io::stdout().lock(), &reply) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

/// Address space and CPU time for this process; no core file when a limit ends it.
#[cfg(unix)]
fn limit_self(memory: u64, cpu_secs: u64) -> std::io::Result<()> {
    let set = |resource, soft: u64, hard: u64| {
        let limit = libc::rlimit {
            rlim_cur: soft as libc::rlim_t,
            rlim_max: hard as libc::rlim_t,
        };
        // SAFETY: setrlimit reads the struct we pass and nothing else.
        if unsafe { libc::setrlimit(resource, &limit) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    };
    set(libc::RLIMIT_CORE, 0, 0)?;
    set(libc::RLIMIT_AS, memory, memory)?;
    // The soft limit sends SIGXCPU; the hard one, a second later, SIGKILL.
    set(libc::RLIMIT_CPU, cpu_secs, cpu_secs + 1)
}

/// Without rlimits there is no way to hold the renderer to its memory and CPU limits, and an
/// unbounded template is what this process exists to contain: refuse, with the reason.
#[cfg(not(unix))]
fn limit_self(_memory: u64, _cpu_secs: u64) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "memory and CPU limits for the template renderer are not supported on this platform, so \
         templates that need them (see docs/spec.md#template-limits) cannot be rendered here",
    ))
}
