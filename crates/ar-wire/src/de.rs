//! Small serde helpers that reproduce Go `encoding/json` behaviour: null tolerance and `omitempty` predicates.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Decodes a field the way Go does for non-pointer fields: JSON `null` leaves the zero value.
pub(crate) fn nd<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Decodes an omitempty `json.RawMessage`: a present `null` stays `Some(Value::Null)` (Go keeps the
/// four bytes `null` and writes them back), an absent field stays `None`.
pub(crate) fn raw<'de, D>(deserializer: D) -> Result<Option<Value>, D::Error>
where
    D: Deserializer<'de>,
{
    Value::deserialize(deserializer).map(Some)
}

/// Decodes a free-form field that must be a JSON object when present (`null` is kept as is).
pub(crate) fn object_or_null<'de, D>(deserializer: D) -> Result<Value, D::Error>
where
    D: Deserializer<'de>,
{
    let value = Value::deserialize(deserializer)?;
    if value.is_object() || value.is_null() {
        Ok(value)
    } else {
        Err(serde::de::Error::custom("must be a JSON object"))
    }
}

/// `omitempty` for Go integers.
pub(crate) fn is_zero(value: &i64) -> bool {
    *value == 0
}

/// `omitempty` for Go booleans.
pub(crate) fn is_false(value: &bool) -> bool {
    !*value
}
