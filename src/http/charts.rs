//! The subnet pages' two charts, drawn here as SVG (no scripts): each validator's vTrust
//! and the ratio each vote set, over chain blocks, on one frame, one color and dash per
//! validator, with a legend naming validators as every page does.

use crate::audit::report::{percent, validator_cell, Identities};
use crate::bytes::ValidatorKey;
use maud::{html, Markup};
use std::collections::BTreeMap;

/// The frame both charts share: chain blocks `first..=last` across, a share in ppm from
/// `low` to 10^6 up, as SVG coordinates.
struct Frame {
    first: u64,
    last: u64,
    low: u32,
}

impl Frame {
    const WIDTH: f64 = 720.0;
    const HEIGHT: f64 = 240.0;
    const PAD: f64 = 40.0;

    fn new(first: u64, last: u64, low: u32) -> Frame {
        Frame { first, last: last.max(first + 1), low }
    }

    fn x(&self, block: u64) -> f64 {
        Self::PAD + (block - self.first) as f64 / (self.last - self.first) as f64 * (Self::WIDTH - 2.0 * Self::PAD)
    }

    fn y(&self, ppm: u32) -> f64 {
        let span = f64::from(1_000_000 - self.low);
        Self::HEIGHT - Self::PAD - (f64::from(ppm) - f64::from(self.low)) / span * (Self::HEIGHT - 2.0 * Self::PAD)
    }

    /// An SVG path through `points`.
    fn path(&self, points: &[(u64, u32)]) -> String {
        points
            .iter()
            .enumerate()
            .map(|(i, (block, ppm))| {
                format!("{}{:.1},{:.1}", if i == 0 { "M" } else { " L" }, self.x(*block), self.y(*ppm))
            })
            .collect()
    }

    /// An SVG chart with `id` and `title`: axes, the ticks of the share, the first and last
    /// block, then `content`.
    fn chart(&self, id: &str, title: &str, content: Markup) -> Markup {
        let (width, height, pad) = (Self::WIDTH, Self::HEIGHT, Self::PAD);
        html! {
            svg id=(id) viewBox=(format!("0 0 {width} {height}")) width=(width) height=(height) role="img" {
                title { (title) }
                line x1=(pad) y1=(height - pad) x2=(width - pad) y2=(height - pad) stroke="#5b6470" {}
                line x1=(pad) y1=(pad) x2=(pad) y2=(height - pad) stroke="#5b6470" {}
                @for tick in [self.low, (self.low + 1_000_000) / 2, 1_000_000] {
                    text x="4" y=(format!("{:.1}", self.y(tick) + 4.0)) font-size="11" { (percent(u64::from(tick))) }
                }
                text x=(pad) y=(height - 8.0) font-size="11" { "block " (self.first) }
                text x=(width - pad) y=(height - 8.0) font-size="11" text-anchor="end" { "block " (self.last) }
                (content)
            }
        }
    }

    /// Dots at `points`, each titled with its block and share.
    fn dots(&self, points: &[(u64, u32)], color: &str, label: &str) -> Markup {
        html! {
            @for (block, ppm) in points {
                circle cx=(format!("{:.1}", self.x(*block))) cy=(format!("{:.1}", self.y(*ppm))) r="3" fill=(color) data-block=(block) data-ppm=(ppm) {
                    title { (label) "block " (block) ": " (percent(u64::from(*ppm))) }
                }
            }
        }
    }
}

/// Colors and dash patterns by a validator's place: lines that coincide (equal vTrust)
/// still show each other's dashes.
const COLORS: [&str; 6] = ["#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f"];
const DASHES: [&str; 4] = ["none", "10 5", "3 4", "14 4 3 4"];

fn color(colors: &BTreeMap<ValidatorKey, usize>, validator: &ValidatorKey) -> (&'static str, &'static str) {
    let i = colors.get(validator).copied().unwrap_or(colors.len());
    (COLORS[i % COLORS.len()], DASHES[i % DASHES.len()])
}

/// The legend of both charts: each validator's color and short key.
/// Each validator's color, named as every page names it (uid and hotkey where the chain
/// was read, its ledger key on hover; else the ledger key).
fn legend<'a>(
    colors: &BTreeMap<ValidatorKey, usize>,
    validators: impl Iterator<Item = &'a ValidatorKey>,
    identities: &Identities,
) -> Markup {
    html! {
        @for validator in validators {
            span style=(format!("color:{}", color(colors, validator).0)) { "\u{25a0} " } (validator_cell(validator, identities)) " "
        }
    }
}

/// Each validator's vTrust over chain blocks, one line per validator, as SVG.
pub(super) fn vtrust_chart(
    history: &[(u64, Vec<(ValidatorKey, u32)>)],
    colors: &BTreeMap<ValidatorKey, usize>,
    identities: &Identities,
) -> Markup {
    let frame = Frame::new(history.first().map_or(0, |p| p.0), history.last().map_or(1, |p| p.0), 0);
    let mut validators: Vec<ValidatorKey> = history.iter().flat_map(|(_, v)| v.iter().map(|(k, _)| *k)).collect();
    validators.sort_unstable();
    validators.dedup();
    let lines = html! {
        @for validator in &validators {
            @let points: Vec<(u64, u32)> = history
                .iter()
                .filter_map(|(block, all)| all.iter().find(|(k, _)| k == validator).map(|(_, ppm)| (*block, *ppm)))
                .collect();
            @let (stroke, dash) = color(colors, validator);
            g data-validator=(validator.to_hex()) {
                title { (validator.to_hex()) }
                path d=(frame.path(&points)) fill="none" stroke=(stroke) stroke-width="2" stroke-dasharray=(dash) {}
                (frame.dots(&points, stroke, &format!("{} at ", &validator.to_hex()[..16])))
            }
        }
    };
    html! {
        (frame.chart("vtrust-chart", "Each validator's vTrust, by chain block", lines))
        p.legend { (legend(colors, validators.iter(), identities)) }
    }
}

/// The ratio each validator's votes set (dots, one color per validator: each plays its
/// own challenges, so they differ) and the network's ratio to beat as each crowning set
/// it (a black step line, before decay), over chain blocks, as SVG.
pub(super) fn ratio_chart(
    points: &[(ValidatorKey, Vec<(u64, u32)>)],
    steps: &[(u64, u32)],
    colors: &BTreeMap<ValidatorKey, usize>,
    identities: &Identities,
) -> Markup {
    let blocks = points.iter().flat_map(|(_, p)| p.iter().map(|p| p.0)).chain(steps.iter().map(|s| s.0));
    let (first, last) = blocks.fold((u64::MAX, 0), |(lo, hi), b| (lo.min(b), hi.max(b)));
    // The ratio lives in [0.5, 1].
    let frame = Frame::new(first.min(last), last, 500_000);
    let mut step_path = String::new();
    for (i, (block, ppm)) in steps.iter().enumerate() {
        let (x, y) = (frame.x(*block), frame.y(*ppm));
        step_path += &if i == 0 { format!("M{x:.1},{y:.1}") } else { format!(" H{x:.1} V{y:.1}") };
    }
    if !steps.is_empty() {
        step_path += &format!(" H{:.1}", frame.x(frame.last));
    }
    let content = html! {
        @for (validator, set) in points {
            g data-validator=(validator.to_hex()) { (frame.dots(set, color(colors, validator).0, &format!("{} set at ", &validator.to_hex()[..16]))) }
        }
        @if !steps.is_empty() { path #network-ratio d=(step_path) fill="none" stroke="#1b1f24" stroke-width="2" {} }
    };
    html! {
        (frame.chart("ratio-chart", "The ratio each validator's votes set, and the network's ratio to beat, by chain block", content))
        p.legend {
            (legend(colors, points.iter().map(|(v, _)| v), identities))
            @if !steps.is_empty() { span { "\u{2014} the network's ratio to beat, as each crowning set it (before decay)" } }
            @else { span.muted { "no crowning at a chain block yet: the network's ratio to beat is its starting value" } }
        }
    }
}
