//! A progress bar on stderr for long runs: it appears after the first second, and only when
//! stderr is a terminal (the caller leaves it off when rows go to the same terminal, which
//! the bar's redrawing would erase). It counts from the run's start, so its rate, elapsed
//! time and estimate cover the whole run.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

const DELAY: Duration = Duration::from_secs(1);

pub struct Progress {
    began: Instant,
    /// Counting from the start, drawn from the first second on; `None` when disabled.
    bar: Option<ProgressBar>,
    shown: bool,
}

impl Progress {
    /// Progress over `steps` steps; nothing is drawn unless `enabled` and stderr is a
    /// terminal.
    pub fn new(enabled: bool, steps: u64) -> Self {
        let enabled = enabled && std::io::stderr().is_terminal();
        let bar = enabled.then(|| {
            let bar = ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::hidden());
            bar.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:40}] {pos}/{len} steps, {per_sec}, eta {eta}",
                )
                .expect("the template is valid")
                .progress_chars("=> "),
            );
            bar
        });
        Self {
            began: Instant::now(),
            bar,
            shown: false,
        }
    }

    /// Records that `done` steps are complete.
    pub fn advance(&mut self, done: u64) {
        let Some(bar) = &self.bar else {
            return;
        };
        bar.set_position(done);
        if !self.shown && self.began.elapsed() >= DELAY {
            bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
            self.shown = true;
        }
    }

    /// Clears the bar.
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
