//! The HTML report (`ledgershield report --format html`): one self-contained page that reads
//! offline — an embedded stylesheet, no script, no external resource — with the report's sections
//! as real tables and its charts as inline SVG with labelled axes and units. Ratios (0–1) and
//! amounts never share an axis; the authority chart's rows are the environment's own authority
//! levels in rank order; scatter labels are placed so they never overlap (a label with no free
//! spot is numbered on the chart and named in the table under it).

use crate::product::{loss_bars, visualization, Bar};
use crate::report::BenchmarkReport;
use crate::tables::{f4, o4};
use std::fmt::Write;

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;color:#1b2430;max-width:1080px;margin:2em auto;padding:0 1em;line-height:1.4}\
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #d5dbe3;padding-bottom:.2em;margin-top:1.6em}h3{font-size:1.05em}\
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.92em}th,td{border:1px solid #d5dbe3;padding:3px 8px;text-align:left;vertical-align:top}\
th{background:#eef2f6}td.num{text-align:right;font-variant-numeric:tabular-nums}figure{margin:1em 0}figcaption{font-weight:600;margin-bottom:.3em}\
svg{max-width:100%;height:auto;font-size:11px}svg .grid{stroke:#e3e8ee}svg .axis{stroke:#5b6675}svg .tick,svg .lab{fill:#5b6675}svg .title{font-weight:600;fill:#1b2430}\
svg .bar{fill:#1f4e79}svg .bar.money{fill:#c0562c}svg .dot{fill:#1f4e79;stroke:#fff;stroke-width:1.5}svg .line{fill:none;stroke-width:2}\
.muted{color:#5b6675}.two{display:grid;grid-template-columns:1fr 1fr;gap:1em}";

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Money with thousands separators and two decimals.
fn money(x: f64) -> String {
    let s = format!("{:.2}", x.abs());
    let (int, frac) = s.split_once('.').unwrap_or((&s, "00"));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{}{out}.{frac}", if x < 0.0 { "-" } else { "" })
}

/// A cell: numbers right-aligned (a cell whose text parses as a number or is "n/a").
fn cell(s: &str) -> String {
    let numeric = s == "n/a" || s.replace(',', "").parse::<f64>().is_ok();
    format!(
        "<td{}>{}</td>",
        if numeric { " class=\"num\"" } else { "" },
        esc(s)
    )
}

/// A table with a header row.
pub fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = String::from("<table><thead><tr>");
    for h in head {
        let _ = write!(s, "<th scope=\"col\">{}</th>", esc(h));
    }
    s.push_str("</tr></thead><tbody>");
    for r in rows {
        s.push_str("<tr>");
        for c in r {
            s.push_str(&cell(c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

/// A two-column metric table.
fn metrics(rows: &[(&str, String)]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|(k, v)| vec![(*k).to_owned(), v.clone()])
        .collect();
    table(&["metric", "value"], &rows)
}

/// An axis scale: `max` is the top of the axis, `unit` its label, `money` formats amounts.
#[derive(Clone, Copy)]
pub struct Axis<'a> {
    pub max: f64,
    pub unit: &'a str,
    pub money: bool,
}

fn nice_max(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|m| *m >= v)
        .unwrap_or(10.0 * p)
}

fn tick_text(v: f64, axis: Axis<'_>) -> String {
    if axis.money {
        money(v)
    } else if axis.max <= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v}")
    }
}

/// Horizontal bars on one axis from 0 to `axis.max`, ticks every fifth, the unit under the axis,
/// each bar's value at its end. The label column is as wide as the longest label.
pub fn bar_chart(title: &str, bars: &[Bar], axis: Axis<'_>) -> String {
    let label_w = 12.0
        + 6.6
            * bars
                .iter()
                .map(|b| b.label.chars().count())
                .max()
                .unwrap_or(4) as f64;
    let (w, row) = (720.0, 24.0);
    let (x0, right) = (label_w.min(320.0), 90.0);
    let h = 40.0 + row * bars.len().max(1) as f64 + 34.0;
    let span = w - x0 - right;
    let x = |v: f64| x0 + span * (v.max(0.0) / axis.max).min(1.0);
    let mut s = format!("<figure><figcaption>{}</figcaption><svg viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">", esc(title), esc(title));
    let bottom = h - 34.0;
    for i in 0..=5 {
        let v = axis.max * f64::from(i) / 5.0;
        let _ = write!(s, "<line class=\"grid\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"30\" y2=\"{bottom:.1}\"/><text class=\"tick\" x=\"{0:.1}\" y=\"{1:.1}\" text-anchor=\"middle\">{2}</text>", x(v), bottom + 14.0, esc(&tick_text(v, axis)));
    }
    let _ = write!(s, "<line class=\"axis\" x1=\"{x0}\" x2=\"{:.1}\" y1=\"{bottom:.1}\" y2=\"{bottom:.1}\"/><text class=\"lab\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>", x0 + span, x0 + span / 2.0, h - 4.0, esc(axis.unit));
    for (i, b) in bars.iter().enumerate() {
        let y = 34.0 + row * i as f64;
        let value = if axis.money {
            money(b.value)
        } else {
            f4(b.value)
        };
        let _ = write!(s, "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text><rect class=\"bar{}\" x=\"{x0}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\"><title>{}: {}</title></rect><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            x0 - 6.0, y + 15.0, esc(&b.label), if axis.money { " money" } else { "" }, (x(b.value) - x0).max(1.0), row - 6.0, esc(&b.label), esc(&value), x(b.value) + 5.0, y + 15.0, esc(&value));
    }
    s.push_str("</svg></figure>");
    s
}

/// A label box for the greedy placement.
#[derive(Clone, Copy)]
struct Boxed {
    x0: f64,
    y0: f64,
    x1: f64,
    y1: f64,
}

impl Boxed {
    fn overlaps(&self, o: &Boxed) -> bool {
        !(self.x1 < o.x0 || self.x0 > o.x1 || self.y1 < o.y0 || self.y0 > o.y1)
    }
}

/// Place each label at the first of eight offsets that overlaps no placed label nor leaves the
/// plot; `None` when no offset is free.
fn place_labels(
    points: &[(f64, f64, String)],
    w: f64,
    h: f64,
) -> Vec<Option<(f64, f64, &'static str)>> {
    const OFFSETS: [(f64, f64); 8] = [
        (8.0, -6.0),
        (8.0, 14.0),
        (-8.0, -6.0),
        (-8.0, 14.0),
        (8.0, 28.0),
        (-8.0, 28.0),
        (8.0, -20.0),
        (-8.0, -20.0),
    ];
    let mut placed: Vec<Boxed> = points
        .iter()
        .map(|(x, y, _)| Boxed {
            x0: x - 6.0,
            y0: y - 6.0,
            x1: x + 6.0,
            y1: y + 6.0,
        })
        .collect();
    points
        .iter()
        .map(|(x, y, label)| {
            let lw = 6.6 * label.chars().count() as f64;
            OFFSETS.iter().find_map(|(dx, dy)| {
                let x0 = if *dx > 0.0 { x + dx } else { x + dx - lw };
                let b = Boxed {
                    x0,
                    y0: y + dy - 11.0,
                    x1: x0 + lw,
                    y1: y + dy + 2.0,
                };
                let inside = b.x0 >= 2.0 && b.x1 <= w - 2.0 && b.y0 >= 2.0 && b.y1 <= h - 2.0;
                (inside && placed.iter().all(|p| !p.overlaps(&b))).then(|| {
                    placed.push(b);
                    (b.x0, y + dy, "start")
                })
            })
        })
        .collect()
}

/// Accuracy (x, 0–1) against the institutional loss score (y, 0–1) per agent.
pub fn scatter(title: &str, pts: &[(String, f64, f64)], x_label: &str, y_label: &str) -> String {
    let (w, h, l, b, t, r) = (720.0, 420.0, 64.0, 48.0, 16.0, 20.0);
    let xs = |v: f64| l + (w - l - r) * v.clamp(0.0, 1.0);
    let ys = |v: f64| h - b - (h - b - t) * v.clamp(0.0, 1.0);
    let mut s = format!("<figure><figcaption>{}</figcaption><svg viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">", esc(title), esc(title));
    for i in 0..=4 {
        let v = f64::from(i) / 4.0;
        let _ = write!(s, "<line class=\"grid\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{t}\" y2=\"{1:.1}\"/><text class=\"tick\" x=\"{0:.1}\" y=\"{2:.1}\" text-anchor=\"middle\">{v:.2}</text>", xs(v), h - b, h - b + 14.0);
        let _ = write!(s, "<line class=\"grid\" x1=\"{l}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{1:.1}\"/><text class=\"tick\" x=\"{2:.1}\" y=\"{3:.1}\" text-anchor=\"end\">{v:.2}</text>", w - r, ys(v), l - 6.0, ys(v) + 4.0);
    }
    let _ = write!(s, "<text class=\"lab\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text><text class=\"lab\" transform=\"rotate(-90 14 {:.1})\" x=\"14\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
        (w + l) / 2.0, h - 8.0, esc(x_label), (h - b + t) / 2.0, (h - b + t) / 2.0, esc(y_label));
    let screen: Vec<(f64, f64, String)> = pts
        .iter()
        .map(|(n, x, y)| (xs(*x), ys(*y), n.clone()))
        .collect();
    let labels = place_labels(&screen, w, h - b);
    let mut unplaced = Vec::new();
    for (i, ((sx, sy, name), (_, x, y))) in screen.iter().zip(pts).enumerate() {
        let _ = write!(s, "<circle class=\"dot\" cx=\"{sx:.1}\" cy=\"{sy:.1}\" r=\"6\"><title>{}: accuracy {x:.4}, loss score {y:.4}</title></circle>", esc(name));
        match labels[i] {
            Some((lx, ly, anchor)) => {
                let _ = write!(
                    s,
                    "<text x=\"{lx:.1}\" y=\"{ly:.1}\" text-anchor=\"{anchor}\">{}</text>",
                    esc(name)
                );
            }
            None => {
                unplaced.push(vec![
                    format!("{}", unplaced.len() + 1),
                    name.clone(),
                    f4(*x),
                    f4(*y),
                ]);
                let _ = write!(s, "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"9\">{}</text>", sx, sy + 3.0, unplaced.len());
            }
        }
    }
    s.push_str("</svg></figure>");
    if !unplaced.is_empty() {
        s.push_str(&table(&["#", "agent", "accuracy", "loss score"], &unplaced));
    }
    s
}

/// A step chart of the authority level over the sequence, one row per level (least authority at
/// the bottom); `levels` is most authority first.
pub fn authority_chart(title: &str, points: &[(usize, String)], levels: &[&str]) -> String {
    let (w, row, l, r, t) = (720.0, 44.0, 150.0, 20.0, 16.0);
    let h = t + row * (levels.len().max(2) - 1) as f64 + 48.0;
    let n = points.iter().map(|p| p.0).max().unwrap_or(1).max(1) as f64;
    let xs = |i: usize| l + (w - l - r) * i as f64 / n;
    let ys = |lvl: &str| {
        levels
            .iter()
            .position(|x| *x == lvl)
            .map(|k| t + row * k as f64)
    };
    let mut s = format!("<figure><figcaption>{}</figcaption><svg viewBox=\"0 0 {w} {h:.1}\" role=\"img\" aria-label=\"{}\">", esc(title), esc(title));
    for (k, lvl) in levels.iter().enumerate() {
        let y = t + row * k as f64;
        let _ = write!(s, "<line class=\"grid\" x1=\"{l}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/><text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>", w - r, l - 6.0, y + 4.0, esc(lvl));
    }
    let bottom = t + row * (levels.len().max(2) - 1) as f64;
    for i in 0..=5 {
        let idx = (n * f64::from(i) / 5.0).round() as usize;
        let _ = write!(
            s,
            "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{idx}</text>",
            xs(idx),
            bottom + 16.0
        );
    }
    let _ = write!(s, "<text class=\"lab\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">case in the sequence</text>", (w + l) / 2.0, h - 6.0);
    let drawn: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|(i, lvl)| ys(lvl).map(|y| (xs(*i), y)))
        .collect();
    let mut d = String::new();
    for (k, (x, y)) in drawn.iter().enumerate() {
        let _ = if k == 0 {
            write!(d, "M{x:.1},{y:.1}")
        } else {
            write!(d, " H{x:.1} V{y:.1}")
        };
    }
    let _ = write!(s, "<path class=\"line\" stroke=\"#1f4e79\" d=\"{d}\"/>");
    for ((i, lvl), (x, y)) in points
        .iter()
        .filter(|(_, lvl)| ys(lvl).is_some())
        .zip(&drawn)
    {
        let _ = write!(s, "<circle class=\"dot\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3.5\"><title>case {i}: {}</title></circle>", esc(lvl));
    }
    s.push_str("</svg></figure>");
    let unknown: Vec<&str> = points
        .iter()
        .filter(|(_, lvl)| ys(lvl).is_none())
        .map(|(_, l)| l.as_str())
        .collect();
    if !unknown.is_empty() {
        let _ = write!(
            s,
            "<p class=\"muted\">Levels not among the environment's: {}</p>",
            esc(&unknown.join(", "))
        );
    }
    s
}

/// One line of a chart: its name, its colour and its (x, y) points.
pub type Series<'a> = (&'a str, &'a str, Vec<(f64, f64)>);

/// Lines over the sequence on a 0–1 axis (institutional loss score, case score).
pub fn ratio_lines(title: &str, series: &[Series<'_>], x_max: f64) -> String {
    let (w, h, l, b, t, r) = (720.0, 300.0, 56.0, 44.0, 16.0, 20.0);
    let xs = |v: f64| l + (w - l - r) * v / x_max.max(1.0);
    let ys = |v: f64| h - b - (h - b - t) * v.clamp(0.0, 1.0);
    let mut s = format!("<figure><figcaption>{}</figcaption><svg viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">", esc(title), esc(title));
    for i in 0..=4 {
        let v = f64::from(i) / 4.0;
        let _ = write!(s, "<line class=\"grid\" x1=\"{l}\" x2=\"{:.1}\" y1=\"{1:.1}\" y2=\"{1:.1}\"/><text class=\"tick\" x=\"{2:.1}\" y=\"{3:.1}\" text-anchor=\"end\">{v:.2}</text>", w - r, ys(v), l - 6.0, ys(v) + 4.0);
    }
    for i in 0..=5 {
        let v = (x_max * f64::from(i) / 5.0).round();
        let _ = write!(
            s,
            "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{v}</text>",
            xs(v),
            h - b + 14.0
        );
    }
    let _ = write!(s, "<text class=\"lab\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">case in the sequence</text><text class=\"lab\" transform=\"rotate(-90 14 {:.1})\" x=\"14\" y=\"{:.1}\" text-anchor=\"middle\">score (0 to 1)</text>", (w + l) / 2.0, h - 6.0, (h - b + t) / 2.0, (h - b + t) / 2.0);
    for (k, (name, color, pts)) in series.iter().enumerate() {
        let d: Vec<String> = pts
            .iter()
            .enumerate()
            .map(|(i, (x, y))| {
                format!(
                    "{}{:.1},{:.1}",
                    if i == 0 { "M" } else { "L" },
                    xs(*x),
                    ys(*y)
                )
            })
            .collect();
        let _ = write!(s, "<path class=\"line\" stroke=\"{color}\" d=\"{}\"/><rect x=\"{:.1}\" y=\"{:.1}\" width=\"12\" height=\"4\" fill=\"{color}\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>", d.join(" "), l + 10.0 + 170.0 * k as f64, t + 2.0, l + 26.0 + 170.0 * k as f64, t + 7.0, esc(name));
    }
    s.push_str("</svg></figure>");
    s
}

/// The environment's authority levels, most authority first.
fn authority_levels() -> Vec<&'static str> {
    use ls_env::memory::AuthorityLevel as A;
    let mut v = [
        A::FullAuthority,
        A::RestrictedAuthority,
        A::ReviewOnly,
        A::Locked,
    ];
    v.sort_by_key(|a| a.rank());
    v.iter().map(|a| a.as_str()).collect()
}

/// The charts section.
fn charts(r: &BenchmarkReport) -> String {
    let viz = visualization(Some(r), &Default::default());
    let mut s = String::from("<h2>Charts</h2>");
    let mut ladder = viz.charts.score_ladder.clone();
    ladder.sort_by(|a, b| b.value.total_cmp(&a.value));
    s.push_str(&bar_chart(
        "Score ladder: mean public score per agent",
        &ladder,
        Axis {
            max: 1.0,
            unit: "mean score (0 to 1)",
            money: false,
        },
    ));
    let pts: Vec<(String, f64, f64)> = r
        .experiment_suite
        .baseline_matrix
        .iter()
        .filter_map(|p| {
            p.institutional_loss_score
                .map(|y| (p.agent_name.clone(), p.accuracy, y))
        })
        .collect();
    if pts.is_empty() {
        s.push_str("<p class=\"muted\">No institutional loss score in this build: no accuracy-vs-loss chart.</p>");
    } else {
        s.push_str(&scatter(
            "Accuracy vs institutional loss score (ControlBench quarter)",
            &pts,
            "accuracy (0 to 1)",
            "institutional loss score (0 to 1, higher is better)",
        ));
    }
    if let Some(q) = &r.controlbench_quarter {
        let levels = authority_levels();
        let pts: Vec<(usize, String)> = q
            .authority_timeline
            .iter()
            .map(|t| {
                (
                    t.sequence_index,
                    t.authority_level.clone().unwrap_or_else(|| "n/a".into()),
                )
            })
            .collect();
        if !pts.is_empty() {
            s.push_str(&authority_chart(
                "Authority level over the ControlBench sequence",
                &pts,
                &levels,
            ));
        }
        let loss: Vec<(f64, f64)> = q
            .authority_timeline
            .iter()
            .filter_map(|t| {
                t.institutional_loss_score
                    .map(|l| (t.sequence_index as f64, l))
            })
            .collect();
        let scores: Vec<(f64, f64)> = q
            .case_results
            .iter()
            .enumerate()
            .map(|(i, c)| ((i + 1) as f64, c.score))
            .collect();
        let x_max = scores.len().max(loss.len()).max(1) as f64;
        s.push_str(&ratio_lines(
            "Institutional loss score and case score over the sequence",
            &[
                ("institutional loss score", "#1f4e79", loss),
                ("case score", "#c0562c", scores),
            ],
            x_max,
        ));
        let bars = loss_bars(&q.profile.loss_surface);
        let (ratios, amounts): (Vec<Bar>, Vec<Bar>) =
            bars.into_iter().partition(|b| b.id.ends_with("_ratio"));
        s.push_str("<div class=\"two\">");
        if !ratios.is_empty() {
            s.push_str(&bar_chart(
                "Loss surface: ratios",
                &ratios,
                Axis {
                    max: 1.0,
                    unit: "ratio (0 to 1)",
                    money: false,
                },
            ));
        }
        if !amounts.is_empty() {
            let top = nice_max(amounts.iter().map(|b| b.value).fold(0.0, f64::max));
            s.push_str(&bar_chart(
                "Loss surface: amounts",
                &amounts,
                Axis {
                    max: top,
                    unit: "amount (invoice currency)",
                    money: true,
                },
            ));
        }
        s.push_str("</div>");
    }
    s
}

/// The report page.
pub fn page(r: &BenchmarkReport) -> String {
    let mut s = format!("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>LedgerShield ControlBench report</title><style>{STYLE}</style></head><body><h1>LedgerShield ControlBench benchmark report</h1>");
    let _ = write!(
        s,
        "<p>{} · generated {} · {}</p>",
        esc(&r.benchmark_identity),
        esc(if r.generated_at.is_empty() {
            "(not stamped)"
        } else {
            &r.generated_at
        }),
        esc(&r.evaluation_protocol.generator)
    );
    s.push_str(&sections::protocol_and_agents(r));
    s.push_str(&charts(r));
    s.push_str(&sections::benchmark(r));
    s.push_str(&sections::tracks(r));
    s.push_str(&sections::experiments(r));
    s.push_str("</body></html>");
    s
}

mod sections;

#[cfg(test)]
mod tests;
