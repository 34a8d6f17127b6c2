use super::*;

fn bar(id: &str, label: &str, value: f64) -> Bar {
    Bar {
        id: id.into(),
        label: label.into(),
        value,
    }
}

/// The numbers in attribute `name="…"` of every element whose tag starts with `tag`.
fn attrs(svg: &str, tag: &str, name: &str) -> Vec<f64> {
    svg.split(&format!("<{tag}"))
        .skip(1)
        .filter_map(|e| {
            let at = e.find(&format!(" {name}=\""))? + name.len() + 3;
            e[at..].split('"').next()?.parse().ok()
        })
        .collect()
}

#[test]
fn the_page_is_offline_tables_and_charts_without_a_markdown_dump() {
    let page = page(&BenchmarkReport::default());
    assert!(page.starts_with("<!doctype html>"));
    assert!(!page.contains("<pre"), "no preformatted Markdown dump");
    assert!(!page.contains("<script"), "no script");
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "nothing from elsewhere"
    );
    assert!(
        !page.contains("| ---") && !page.contains("|---"),
        "no Markdown table syntax"
    );
    for h in [
        "Evaluation protocol",
        "Agent ladder",
        "Public benchmark",
        "Official tracks",
        "Experiment suite",
        "Charts",
    ] {
        assert!(page.contains(&format!("<h2>{h}</h2>")), "missing {h}");
    }
    assert!(page.matches("<table>").count() >= 5);
    // An empty human baseline says so instead of printing zeros.
    assert!(page.contains("no data supplied"));
}

#[test]
fn bars_stay_inside_the_axis_and_labels_get_their_width() {
    let long = "Authority restriction ratio of the whole quarter";
    let svg = bar_chart(
        "ratios",
        &[bar("a_ratio", long, 0.5), bar("b_ratio", "B", 1.7)],
        Axis {
            max: 1.0,
            unit: "ratio (0 to 1)",
            money: false,
        },
    );
    let widths = attrs(&svg, "rect", "width");
    let x0 = attrs(&svg, "rect", "x")[0];
    let span = 720.0 - x0 - 90.0;
    assert!(
        widths.iter().all(|w| *w <= span + 0.01),
        "{widths:?} > {span}"
    );
    // The label column holds the longest label (6.6 px a character at 11 px).
    assert!(x0 >= 6.6 * long.chars().count() as f64, "label column {x0}");
    assert!(
        svg.contains(">ratio (0 to 1)</text>"),
        "the axis names its unit"
    );
    assert!(
        svg.contains(">1.00</text>") && svg.contains(">0.00</text>"),
        "ratio ticks"
    );
}

#[test]
fn amounts_get_their_own_money_axis() {
    let svg = bar_chart(
        "amounts",
        &[bar(
            "fraud_loss_prevented",
            "Fraud loss prevented",
            123_456.7,
        )],
        Axis {
            max: nice_max(123_456.7),
            unit: "amount",
            money: true,
        },
    );
    assert!(svg.contains(">200,000.00</text>"), "money ticks: {svg}");
    assert!(
        svg.contains(">123,456.70</text>"),
        "the bar's value as money"
    );
    assert_eq!(money(-1234.5), "-1,234.50");
    assert_eq!(nice_max(0.0), 1.0);
    assert_eq!(nice_max(3.1), 5.0);
}

#[test]
fn scatter_labels_never_overlap_and_crowded_ones_are_listed() {
    // Twelve agents on nearly the same spot: some labels cannot be placed.
    let pts: Vec<(String, f64, f64)> = (0..12)
        .map(|i| {
            (
                format!("agent-{i:02}-with-a-long-name"),
                0.5 + 0.001 * f64::from(i),
                0.5,
            )
        })
        .collect();
    let screen: Vec<(f64, f64, String)> = pts
        .iter()
        .map(|(n, x, y)| (64.0 + 636.0 * x, 404.0 - 356.0 * y, n.clone()))
        .collect();
    let placed = place_labels(&screen, 720.0, 372.0);
    let boxes: Vec<Boxed> = placed
        .iter()
        .zip(&screen)
        .filter_map(|(p, (_, _, n))| {
            p.map(|(x, y, _)| Boxed {
                x0: x,
                y0: y - 11.0,
                x1: x + 6.6 * n.chars().count() as f64,
                y1: y + 2.0,
            })
        })
        .collect();
    for (i, a) in boxes.iter().enumerate() {
        for b in &boxes[i + 1..] {
            assert!(!a.overlaps(b), "labels overlap");
        }
    }
    let unplaced = placed.iter().filter(|p| p.is_none()).count();
    assert!(unplaced > 0, "the crowd must leave some labels unplaced");
    let svg = scatter("s", &pts, "accuracy (0 to 1)", "loss score (0 to 1)");
    assert_eq!(svg.matches("<circle").count(), 12);
    assert_eq!(
        svg.matches("<tr><td class=\"num\">").count(),
        unplaced,
        "each unplaced label is in the table"
    );
}

#[test]
fn authority_rows_are_the_environments_levels_in_rank_order() {
    let levels = authority_levels();
    assert_eq!(
        levels,
        [
            "full_authority",
            "restricted_authority",
            "review_only",
            "locked"
        ]
    );
    let pts = vec![
        (1, "full_authority".to_owned()),
        (2, "locked".to_owned()),
        (3, "limited_authority".to_owned()),
    ];
    let svg = authority_chart("a", &pts, &levels);
    let rows: Vec<&str> = levels
        .iter()
        .copied()
        .filter(|l| svg.contains(&format!(">{l}</text>")))
        .collect();
    assert_eq!(rows, levels);
    // `locked` is drawn on its own (bottom) row, not on another level's.
    let cy = attrs(&svg, "circle", "cy");
    assert_eq!(cy.len(), 2, "the unknown level is not drawn");
    assert!((cy[1] - (16.0 + 44.0 * 3.0)).abs() < 0.01, "{cy:?}");
    assert!(svg.contains("Levels not among the environment's: limited_authority"));
}
