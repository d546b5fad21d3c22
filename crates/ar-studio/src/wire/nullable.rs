//! Serde helper: a JSON `null` reads as the type's default (Go clients send `null` for empty lists).

use serde::{Deserialize, Deserializer};

/// Deserializes `null` as `T::default()`.
pub(crate) fn or_default<'de, D, T>(de: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(de)?.unwrap_or_default())
}
