//! Rates as people type them: `100k`, `1.5M` frames per second, `100M` or `100Mbit` bit/s.
//!
//! Suffixes are decimal (k = 10^3, M = 10^6, G = 10^9), as in iperf's `-b`. A bit rate
//! counts the frame bytes without FCS, preamble and gap, so `--bitrate` of
//! `size * 8 * pps` gives `pps` frames per second.

/// The generator's target: frames per second, or as fast as the device takes them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    Pps(f64),
    Unlimited,
}

/// The highest rate accepted; far above what any software path here reaches.
const MAX_PPS: f64 = 1e9;

/// Parses a frame rate: `100k`, `1.5M`, `300000`, `250kpps`; `max` or `unlimited`.
pub fn parse_rate(text: &str) -> Result<Rate, String> {
    if matches!(text, "max" | "unlimited") {
        return Ok(Rate::Unlimited);
    }
    let pps = parse_scaled(text, &["pps", ""], "frame rate", "100k, 1.5M or unlimited")?;
    if pps > MAX_PPS {
        return Err(format!(
            "frame rate `{text}` is above {MAX_PPS:e} frames/s; use `unlimited` for as fast as possible"
        ));
    }
    Ok(Rate::Pps(pps))
}

/// Parses a bit rate in bit/s: `100M`, `100Mbit`, `1.5Gbit/s`, `2.5Gbps`.
pub fn parse_bitrate(text: &str) -> Result<f64, String> {
    parse_scaled(
        text,
        &["bit/s", "bps", "bit", "b", ""],
        "bit rate",
        "100M or 1.5Gbit",
    )
}

/// Turns a bit rate into frames per second for frames of `frame_size` bytes.
pub fn bitrate_to_pps(bits_per_second: f64, frame_size: usize) -> f64 {
    bits_per_second / (frame_size as f64 * 8.0)
}

/// A positive finite number with an optional k/M/G prefix followed by one of `units`.
fn parse_scaled(text: &str, units: &[&str], what: &str, example: &str) -> Result<f64, String> {
    let bad = |why: &str| format!("{what} `{text}` {why} (examples: {example})");
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, rest) = text.split_at(number_end);
    let value: f64 = number.parse().map_err(|_| bad("is not a number"))?;
    let (scale, unit) = match rest.chars().next() {
        Some('k' | 'K') => (1e3, &rest[1..]),
        Some('M') => (1e6, &rest[1..]),
        Some('G') => (1e9, &rest[1..]),
        _ => (1.0, rest),
    };
    if !units.contains(&unit) {
        return Err(bad("has an unknown unit"));
    }
    let value = value * scale;
    if !value.is_finite() || value <= 0.0 {
        return Err(bad("must be above zero"));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_rates_take_decimal_suffixes() {
        assert_eq!(parse_rate("100k"), Ok(Rate::Pps(100_000.0)));
        assert_eq!(parse_rate("1.5M"), Ok(Rate::Pps(1_500_000.0)));
        assert_eq!(parse_rate("300000"), Ok(Rate::Pps(300_000.0)));
        assert_eq!(parse_rate("250kpps"), Ok(Rate::Pps(250_000.0)));
        assert_eq!(parse_rate("unlimited"), Ok(Rate::Unlimited));
        assert_eq!(parse_rate("max"), Ok(Rate::Unlimited));
    }

    #[test]
    fn bit_rates_take_suffixes_and_units() {
        assert_eq!(parse_bitrate("100M"), Ok(100e6));
        assert_eq!(parse_bitrate("100Mbit"), Ok(100e6));
        assert_eq!(parse_bitrate("1.5Gbit/s"), Ok(1.5e9));
        assert_eq!(parse_bitrate("64kbps"), Ok(64e3));
        assert_eq!(bitrate_to_pps(100e6, 1250), 10_000.0);
    }

    #[test]
    fn zero_negative_and_garbage_are_refused_with_the_reason() {
        for (text, why) in [
            ("0", "above zero"),
            ("0k", "above zero"),
            ("-5k", "not a number"),
            ("", "not a number"),
            ("fast", "not a number"),
            ("1..5M", "not a number"),
            ("10x", "unknown unit"),
            ("10Mbit", "unknown unit"),
        ] {
            let err = parse_rate(text).unwrap_err();
            assert!(
                err.contains(why) && err.contains("frame rate"),
                "{text}: {err}"
            );
        }
        assert!(parse_rate("2G").unwrap_err().contains("unlimited"));
        assert!(parse_bitrate("100Mpps")
            .unwrap_err()
            .contains("unknown unit"));
    }
}
