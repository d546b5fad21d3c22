//! Go-compatible timestamps: RFC 3339 with Go's `RFC3339Nano` output shape, any RFC 3339 on input.
//!
//! Go writes `time.Time` as `2006-01-02T15:04:05.999999999Z07:00`: the fraction is printed with
//! trailing zeros removed and dropped entirely when it is zero. All our times are UTC, so the zone
//! is always `Z`. Inputs with another offset are converted to UTC (the instant is preserved, the
//! original offset is not echoed back).
//!
//! Use `#[serde(with = "crate::time::rfc3339")]` for `time.Time` and
//! `#[serde(with = "crate::time::rfc3339_opt")]` for `*time.Time` with `omitempty`.

use chrono::{DateTime, NaiveDate, SecondsFormat, Timelike, Utc};

/// Formats a timestamp exactly like Go's `time.Time.MarshalJSON` for a UTC time (without quotes).
pub fn format(t: &DateTime<Utc>) -> String {
    // chrono can hold a leap second (`:60`), which Go cannot parse; fold it into `:59.999999999`.
    let folded;
    let t = if t.nanosecond() >= 1_000_000_000 {
        folded = t.with_nanosecond(999_999_999).unwrap_or(*t);
        &folded
    } else {
        t
    };
    // AutoSi would pad to 3/6/9 digits; Go trims every trailing zero, so print 9 and trim.
    let full = t.to_rfc3339_opts(SecondsFormat::Nanos, true);
    match full.find('.') {
        Some(dot) => {
            let frac = full[dot + 1..full.len() - 1].trim_end_matches('0');
            if frac.is_empty() {
                format!("{}Z", &full[..dot])
            } else {
                format!("{}.{}Z", &full[..dot], frac)
            }
        }
        None => full,
    }
}

/// Parses any RFC 3339 timestamp (any offset, any fraction length) into UTC.
pub fn parse(s: &str) -> Result<DateTime<Utc>, chrono::ParseError> {
    DateTime::parse_from_rfc3339(s).map(|t| t.with_timezone(&Utc))
}

/// Go's zero `time.Time` (`0001-01-01T00:00:00Z`), which Go writes for unset non-pointer times.
pub fn go_zero() -> DateTime<Utc> {
    NaiveDate::from_ymd_opt(1, 1, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|n| n.and_utc())
        .unwrap_or_default()
}

/// Whether `t` is Go's zero time, i.e. the sender left the field unset.
pub fn is_go_zero(t: &DateTime<Utc>) -> bool {
    *t == go_zero()
}

/// Serde adapter for a required `time.Time` field. `null` decodes to [`go_zero`], as in Go.
pub mod rfc3339 {
    use chrono::{DateTime, Utc};
    use serde::{de::Error as _, Deserialize, Deserializer, Serializer};

    /// Writes the Go `RFC3339Nano` form.
    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format(t))
    }

    /// Reads any RFC 3339 string; `null` gives Go's zero time.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(super::go_zero()),
            Some(s) => super::parse(&s)
                .map_err(|e| D::Error::custom(format!("invalid RFC 3339 time {s:?}: {e}"))),
        }
    }
}

/// Serde adapter for an optional (`*time.Time`, `omitempty`) field; pair with
/// `skip_serializing_if = "Option::is_none"` and `default`.
pub mod rfc3339_opt {
    use chrono::{DateTime, Utc};
    use serde::{de::Error as _, Deserialize, Deserializer, Serializer};

    /// Writes the Go `RFC3339Nano` form, or `null` for `None` (normally skipped).
    pub fn serialize<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&super::format(t)),
            None => s.serialize_none(),
        }
    }

    /// Reads any RFC 3339 string or `null`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(None),
            Some(s) => super::parse(&s)
                .map(Some)
                .map_err(|e| D::Error::custom(format!("invalid RFC 3339 time {s:?}: {e}"))),
        }
    }
}
