//! The progress bar a run draws on stderr, and the questions asked on that terminal while it is
//! up (a login the run needs): while a question waits for its answer the bar is cleared and not
//! drawn, or its next redraw (another test finishing, a tool's progress) would write over the
//! question and hide it.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The bars drawn so far, each with its gate (true: a question is up, draw nothing), and how
/// many questions are up.
struct Screen {
    bars: Vec<(indicatif::WeakProgressBar, Arc<AtomicBool>)>,
    questions: usize,
}

static SCREEN: Mutex<Screen> = Mutex::new(Screen {
    bars: Vec::new(),
    questions: 0,
});

fn screen() -> std::sync::MutexGuard<'static, Screen> {
    SCREEN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A bar of `len` steps on stderr when stderr is a terminal (never in CI logs), that gives way
/// to [`question`]s.
pub(crate) fn progress_bar(len: u64) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let mut screen = screen();
    let gate = Arc::new(AtomicBool::new(screen.questions > 0));
    // 20 redraws a second at most, as indicatif's own stderr target.
    let target =
        indicatif::ProgressDrawTarget::term_like_with_hz(Box::new(Gated(gate.clone())), 20);
    let bar = indicatif::ProgressBar::with_draw_target(Some(len), target);
    screen.bars.retain(|(b, _)| b.upgrade().is_some());
    screen.bars.push((bar.downgrade(), gate));
    Some(bar)
}

/// Up while a question waits for its answer on the terminal: the bars are cleared when it is
/// made and drawn again, below the question and its answer, when it is dropped.
#[must_use = "the bars come back when this is dropped"]
pub(crate) struct Question(());

/// Clears the progress bars for a question asked now.
pub(crate) fn question() -> Question {
    let mut screen = screen();
    screen.questions += 1;
    if screen.questions == 1 {
        // Cleared while the gate is open, then closed: the redraw `suspend` ends with draws
        // nothing.
        set_gates(&screen, true);
    }
    Question(())
}

impl Drop for Question {
    fn drop(&mut self) {
        let mut screen = screen();
        screen.questions = screen.questions.saturating_sub(1);
        if screen.questions == 0 {
            // The clearing of what was never drawn is swallowed; the bar is drawn afresh.
            set_gates(&screen, false);
        }
    }
}

fn set_gates(screen: &Screen, closed: bool) {
    for (bar, gate) in &screen.bars {
        match bar.upgrade() {
            Some(bar) if !bar.is_finished() => bar.suspend(|| gate.store(closed, Ordering::SeqCst)),
            _ => gate.store(closed, Ordering::SeqCst),
        }
    }
}

/// Stderr, written only while no question is up.
#[derive(Debug)]
struct Gated(Arc<AtomicBool>);

impl Gated {
    fn put(&self, text: &str) -> std::io::Result<()> {
        if self.0.load(Ordering::SeqCst) {
            return Ok(());
        }
        std::io::stderr().lock().write_all(text.as_bytes())
    }

    fn cursor(&self, n: usize, code: char) -> std::io::Result<()> {
        match n {
            0 => Ok(()),
            n => self.put(&format!("\x1b[{n}{code}")),
        }
    }
}

impl indicatif::TermLike for Gated {
    fn width(&self) -> u16 {
        size().1
    }

    fn height(&self) -> u16 {
        size().0
    }

    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        self.cursor(n, 'A')
    }

    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        self.cursor(n, 'B')
    }

    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        self.cursor(n, 'C')
    }

    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        self.cursor(n, 'D')
    }

    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.put(&format!("{s}\n"))
    }

    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.put(s)
    }

    fn clear_line(&self) -> std::io::Result<()> {
        self.put("\r\x1b[2K")
    }

    fn flush(&self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Stderr's terminal's rows and columns (24 × 80 when it does not say).
#[cfg(unix)]
fn size() -> (u16, u16) {
    // SAFETY: a zeroed winsize is valid, and TIOCGWINSZ writes one into it.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(2, libc::TIOCGWINSZ, &mut ws) } == 0;
    match ok && ws.ws_row > 0 && ws.ws_col > 0 {
        true => (ws.ws_row, ws.ws_col),
        false => (24, 80),
    }
}

#[cfg(not(unix))]
fn size() -> (u16, u16) {
    (24, 80)
}
