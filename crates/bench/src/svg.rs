//! A latency CDF plot as a standalone SVG: log-scale latency on x, fraction of steps on y, one
//! polyline per curve. Written by hand: the plot is simple and needs no fonts or renderer.

use std::fmt::Write;
use std::time::Duration;

/// One distribution to draw.
pub struct Curve {
    pub label: String,
    pub color: &'static str,
    pub dashed: bool,
    pub samples: Vec<Duration>,
}

/// Distinct colours for up to ten curves of one engine.
pub const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

const WIDTH: f64 = 980.0;
const HEIGHT: f64 = 560.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 300.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
/// Points drawn per curve at most (evenly spaced in rank): as many samples as a curve needs.
pub const POINTS: usize = 400;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn decade_label(exponent: i32) -> String {
    match exponent {
        -9 => "1ns".into(),
        -8 => "10ns".into(),
        -7 => "100ns".into(),
        -6 => "1µs".into(),
        -5 => "10µs".into(),
        -4 => "100µs".into(),
        -3 => "1ms".into(),
        -2 => "10ms".into(),
        -1 => "100ms".into(),
        0 => "1s".into(),
        1 => "10s".into(),
        2 => "100s".into(),
        e => format!("1e{e}s"),
    }
}

/// The SVG text of a CDF plot of `curves` titled `title`.
pub fn cdf_plot(title: &str, curves: &[Curve]) -> String {
    let seconds = |d: &Duration| d.as_secs_f64().max(1e-9);
    let all = curves.iter().flat_map(|c| c.samples.iter().map(seconds));
    let (low, high) = all.fold((f64::MAX, f64::MIN), |(lo, hi), s| (lo.min(s), hi.max(s)));
    let (low_exp, high_exp) = if low <= high {
        (low.log10().floor() as i32, high.log10().ceil() as i32)
    } else {
        (-6, 0)
    };
    let high_exp = high_exp.max(low_exp + 1);
    let plot_width = WIDTH - LEFT - RIGHT;
    let plot_height = HEIGHT - TOP - BOTTOM;
    let x_of = |s: f64| {
        LEFT + (s.log10() - f64::from(low_exp)) / f64::from(high_exp - low_exp) * plot_width
    };
    let y_of = |fraction: f64| TOP + (1.0 - fraction) * plot_height;

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="22" font-size="15" text-anchor="middle">{}</text>"#,
        LEFT + plot_width / 2.0,
        escape(title)
    );
    // Grid and axis labels.
    for exponent in low_exp..=high_exp {
        let x = x_of(10f64.powi(exponent));
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + plot_height,
            TOP + plot_height + 18.0,
            decade_label(exponent)
        );
    }
    for tenth in 0..=10 {
        let fraction = f64::from(tenth) / 10.0;
        let y = y_of(fraction);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{fraction:.1}</text>"##,
            LEFT + plot_width,
            LEFT - 6.0,
            y + 4.0
        );
    }
    let _ = writeln!(
        svg,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_width}" height="{plot_height}" fill="none" stroke="#333"/>"##
    );
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">per-step latency (log scale)</text>"#,
        LEFT + plot_width / 2.0,
        HEIGHT - 14.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">fraction of steps at most this long</text>"#,
        TOP + plot_height / 2.0,
        TOP + plot_height / 2.0
    );
    // Curves and legend.
    for (index, curve) in curves.iter().enumerate() {
        let mut sorted: Vec<f64> = curve.samples.iter().map(seconds).collect();
        sorted.sort_by(f64::total_cmp);
        let dash = if curve.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        if !sorted.is_empty() {
            let n = sorted.len();
            let points = POINTS.min(n);
            let mut path = String::new();
            for k in 0..points {
                let rank = if points == 1 {
                    n - 1
                } else {
                    k * (n - 1) / (points - 1)
                };
                let x = x_of(sorted[rank]);
                let y = y_of((rank + 1) as f64 / n as f64);
                let _ = write!(path, "{x:.1},{y:.1} ");
            }
            let _ = writeln!(
                svg,
                r#"<polyline fill="none" stroke="{}" stroke-width="1.8"{dash} points="{}"/>"#,
                curve.color,
                path.trim_end()
            );
        }
        let y = TOP + 10.0 + index as f64 * 18.0;
        let x = WIDTH - RIGHT + 16.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
            x + 28.0,
            curve.color,
            x + 34.0,
            y + 4.0,
            escape(&curve.label)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_each_curve_and_label() {
        let curves = vec![
            Curve {
                label: "ripple <1>".into(),
                color: PALETTE[0],
                dashed: false,
                samples: (1..1000).map(Duration::from_micros).collect(),
            },
            Curve {
                label: "dd".into(),
                color: PALETTE[1],
                dashed: true,
                samples: vec![],
            },
        ];
        let svg = cdf_plot("t", &curves);
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.contains("ripple &lt;1&gt;"));
        assert!(svg.contains(">1ms<") && svg.contains(">1µs<"));
        assert!(svg.ends_with("</svg>\n"));
    }
}
