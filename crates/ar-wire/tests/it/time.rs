//! Timestamps: Go `RFC3339Nano` output and lenient RFC 3339 input.

use ar_wire::time::{format, go_zero, is_go_zero, parse};
use ar_wire::{AgentRun, RunMCPCredentialUpdate};
use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;

fn at(nanos: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5)
        .single()
        .expect("valid")
        + chrono::Duration::nanoseconds(i64::from(nanos))
}

#[test]
fn formats_like_go_rfc3339nano() {
    assert_eq!(format(&at(123_456_789)), "2026-01-02T03:04:05.123456789Z");
    assert_eq!(format(&at(0)), "2026-01-02T03:04:05Z");
    assert_eq!(format(&at(500_000_000)), "2026-01-02T03:04:05.5Z");
    assert_eq!(format(&at(120_000_000)), "2026-01-02T03:04:05.12Z");
    assert_eq!(format(&at(1_000)), "2026-01-02T03:04:05.000001Z");
    assert_eq!(format(&at(1)), "2026-01-02T03:04:05.000000001Z");
    assert_eq!(format(&at(100_000_000)), "2026-01-02T03:04:05.1Z");
    assert_eq!(format(&go_zero()), "0001-01-01T00:00:00Z");
}

#[test]
fn parses_any_rfc3339() {
    assert_eq!(parse("2026-01-02T03:04:05Z").expect("plain"), at(0));
    assert_eq!(
        parse("2026-01-02T03:04:05.123456789Z").expect("nanos"),
        at(123_456_789)
    );
    assert_eq!(
        parse("2026-01-02T05:04:05.5+02:00").expect("offset"),
        at(500_000_000)
    );
    assert_eq!(
        parse("2026-01-01T22:04:05-05:00").expect("negative offset"),
        at(0)
    );
    assert_eq!(
        parse("2026-01-02T03:04:05.1234Z").expect("short fraction"),
        at(123_400_000)
    );
    assert!(parse("2026-01-02 03:04").is_err());
    assert!(parse("not a time").is_err());
    assert!(is_go_zero(&parse("0001-01-01T00:00:00Z").expect("go zero")));
}

#[test]
fn serde_fields_use_go_format() {
    let run = AgentRun {
        created_at: at(123_456_789),
        updated_at: at(0),
        started_at: Some(at(10)),
        ..AgentRun::default()
    };
    let v = serde_json::to_value(&run).expect("encode");
    assert_eq!(v["created_at"], "2026-01-02T03:04:05.123456789Z");
    assert_eq!(v["updated_at"], "2026-01-02T03:04:05Z");
    assert_eq!(v["started_at"], "2026-01-02T03:04:05.00000001Z");

    let upd: RunMCPCredentialUpdate = serde_json::from_value(json!({
        "run_id": "r", "server_id": "s", "expires_at": "2026-01-02T04:04:05+01:00", "updated_at": "2026-01-02T03:04:05.500Z"
    }))
    .expect("decode");
    assert_eq!(upd.expires_at, Some(at(0)));
    let back = serde_json::to_value(&upd).expect("encode");
    assert_eq!(back["expires_at"], "2026-01-02T03:04:05Z");
    assert_eq!(back["updated_at"], "2026-01-02T03:04:05.5Z");
}

#[test]
fn invalid_times_are_rejected_with_context() {
    let err = serde_json::from_value::<AgentRun>(json!({"created_at": "yesterday"}))
        .expect_err("bad time");
    assert!(err.to_string().contains("invalid RFC 3339 time"), "{err}");
}

#[test]
fn leap_seconds_fold_into_a_go_parsable_time() {
    let leap = chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
        .and_then(|d| d.and_hms_nano_opt(23, 59, 59, 1_500_000_000))
        .expect("leap second")
        .and_utc();
    assert_eq!(format(&leap), "2016-12-31T23:59:59.999999999Z");
}
