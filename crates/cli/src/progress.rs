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
        Self::with_bar(enabled && std::io::stderr().is_terminal(), steps)
    }

    /// Progress over `steps` steps, drawn (after the first second) if `enabled`.
    fn with_bar(enabled: bool, steps: u64) -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The bar counts from the run's start: shown after the first second, its elapsed time,
    /// rate and estimate cover every step, not only those since it appeared.
    #[test]
    fn rates_and_estimates_cover_the_whole_run() {
        let mut progress = Progress::with_bar(true, 200);
        let began = Instant::now();
        for done in 1..=100 {
            std::thread::sleep(Duration::from_millis(12));
            progress.advance(done);
        }
        let bar = progress.bar.as_ref().expect("enabled");
        assert!(progress.shown);
        let elapsed = began.elapsed();
        assert!(bar.elapsed() + Duration::from_millis(50) >= elapsed);
        // About 100 steps over about 1.2 s, whatever the scheduling: never millions.
        let rate = bar.per_sec();
        assert!((20.0..200.0).contains(&rate), "{rate} steps/s");
        // Half done: the estimate is about as long again.
        assert!(bar.eta() >= Duration::from_millis(300), "{:?}", bar.eta());
        progress.finish();
    }
}
