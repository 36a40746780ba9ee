//! Reading `Retry-After`: delta-seconds or an HTTP-date, turned into a wait from now.
//! Capping and flooring happen in the retry loop, which knows the schedule and the deadline.

use std::time::{Duration, SystemTime};

/// The wait a `Retry-After` value asks for, measured from `now`. `None` when the value is neither
/// form. A date in the past asks for no wait at all.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        // Saturate absurd values instead of failing: the cap takes care of them.
        let secs = value.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_delta_seconds() {
        let now = SystemTime::now();
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("99999999999999999999999", now),
            Some(Duration::from_secs(u64::MAX))
        );
    }

    #[test]
    fn reads_http_dates_relative_to_now() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let later = httpdate::fmt_http_date(now + Duration::from_secs(42));
        assert_eq!(
            parse_retry_after(&later, now),
            Some(Duration::from_secs(42))
        );
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(42));
        assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
    }

    #[test]
    fn rejects_garbage() {
        let now = SystemTime::now();
        for v in ["", "-1", "1.5", "soon", "Wed, 99 Foo 2024"] {
            assert_eq!(parse_retry_after(v, now), None, "{v:?}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = parse_retry_after(&s, SystemTime::now());
        }
    }
}
