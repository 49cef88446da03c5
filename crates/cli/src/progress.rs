//! A progress bar on stderr for long runs: it appears after the first second, and only when
//! stderr is a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

const DELAY: Duration = Duration::from_secs(1);

pub struct Progress {
    enabled: bool,
    steps: u64,
    began: Instant,
    bar: Option<ProgressBar>,
}

impl Progress {
    /// Progress over `steps` steps; nothing is drawn unless `enabled` and stderr is a
    /// terminal.
    pub fn new(enabled: bool, steps: u64) -> Self {
        Self {
            enabled: enabled && std::io::stderr().is_terminal(),
            steps,
            began: Instant::now(),
            bar: None,
        }
    }

    /// Records that `done` steps are complete.
    pub fn advance(&mut self, done: u64) {
        if !self.enabled {
            return;
        }
        if self.bar.is_none() && self.began.elapsed() >= DELAY {
            let bar = ProgressBar::with_draw_target(
                Some(self.steps),
                ProgressDrawTarget::stderr_with_hz(4),
            );
            bar.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:40}] {pos}/{len} steps, {per_sec}, eta {eta}",
                )
                .expect("the template is valid")
                .progress_chars("=> "),
            );
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(done);
        }
    }

    /// Clears the bar.
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
