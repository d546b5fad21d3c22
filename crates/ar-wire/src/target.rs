//! The generic run target reference (`TargetRef`) and its optional display block.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::de::nd;

/// What a run works on: an app-defined `{type, id}` pair plus optional display data and metadata.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct TargetRef {
    /// App-defined target type, e.g. `workspace`, `ticket`.
    #[serde(rename = "type", deserialize_with = "nd")]
    pub target_type: String,
    /// App-defined target id.
    #[serde(deserialize_with = "nd")]
    pub id: String,
    /// Optional human-facing title and link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display: Option<TargetDisplay>,
    /// Free-form app metadata.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

/// Human-facing presentation of a target.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct TargetDisplay {
    /// Display title.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// Link to the target in the host product.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub url: String,
}

impl TargetRef {
    /// Builds a target from its type and id.
    pub fn new(target_type: impl Into<String>, id: impl Into<String>) -> Self {
        Self {
            target_type: target_type.into(),
            id: id.into(),
            ..Self::default()
        }
    }
}
