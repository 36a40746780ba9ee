//! Humane durations (`200ms`, `30s`, `2m`, `1h30m`) and sizes (`8MiB`, `512KB`, `1048576`)
//! as written in mirror.yaml, parsed into `Duration` and byte counts.

use std::time::Duration;

/// Parses a duration: one or more `<integer><unit>` parts, units `ms`, `s`, `m`, `h`
/// (`1h30m`, `1500ms`). A bare number is refused: the unit is never guessed.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("empty duration (write e.g. \"200ms\", \"30s\", \"2m\", \"1h\")".into());
    }
    let mut total = Duration::ZERO;
    let mut rest = trimmed;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return Err(format!(
                "invalid duration \"{text}\": expected a number at \"{rest}\""
            ));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("invalid duration \"{text}\": number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(|b| b.is_ascii_alphabetic()).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => Duration::from_millis(number),
            "s" => Duration::from_secs(number),
            "m" => number
                .checked_mul(60)
                .map(Duration::from_secs)
                .ok_or_else(|| format!("invalid duration \"{text}\": too large"))?,
            "h" => number
                .checked_mul(3600)
                .map(Duration::from_secs)
                .ok_or_else(|| format!("invalid duration \"{text}\": too large"))?,
            "" => {
                return Err(format!(
                    "invalid duration \"{text}\": missing unit (ms, s, m or h)"
                ));
            }
            other => {
                return Err(format!(
                    "invalid duration \"{text}\": unknown unit \"{other}\" (ms, s, m or h)"
                ));
            }
        };
        total = total
            .checked_add(part)
            .ok_or_else(|| format!("invalid duration \"{text}\": too large"))?;
    }
    Ok(total)
}

/// Parses a size: an integer with an optional unit, `B`, `KB`/`MB`/`GB` (powers of 1000) or
/// `KiB`/`MiB`/`GiB` (powers of 1024), case-insensitive, optionally separated by a space.
/// A bare integer is bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let digits = trimmed.bytes().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return Err(format!(
            "invalid size \"{text}\": expected a number such as \"8MiB\""
        ));
    }
    let number: u64 = trimmed[..digits]
        .parse()
        .map_err(|_| format!("invalid size \"{text}\": number too large"))?;
    let unit = trimmed[digits..].trim_start();
    let factor: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1000,
        "mb" => 1000 * 1000,
        "gb" => 1000 * 1000 * 1000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        _ => {
            return Err(format!(
                "invalid size \"{text}\": unknown unit \"{unit}\" (B, KB, MB, GB, KiB, MiB, GiB)"
            ));
        }
    };
    number
        .checked_mul(factor)
        .ok_or_else(|| format!("invalid size \"{text}\": too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("200ms"), Ok(Duration::from_millis(200)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        for bad in ["", "30", "1x", "s", "1.5s", "-1s", "99999999999999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("8MiB"), Ok(8 << 20));
        assert_eq!(parse_size("16 mib"), Ok(16 << 20));
        assert_eq!(parse_size("5MB"), Ok(5_000_000));
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        for bad in ["", "MiB", "8XB", "8.5MiB", "99999999999999GiB"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
