//! Printing for people (aligned tables, `key: value` blocks) and for scripts (JSON).

use serde::Serialize;

use super::{Exit, Failure};

/// Prints `value` as one line of JSON.
pub fn json(value: &impl Serialize) -> Result<(), Failure> {
    let text = serde_json::to_string(value)
        .map_err(|error| Failure::new(Exit::Error, format!("encoding JSON: {error}")))?;
    println!("{text}");
    Ok(())
}

/// Prints rows under `header`, each column as wide as its widest cell.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// Prints `key: value` lines, the keys aligned, empty values left out.
pub fn fields(pairs: &[(&str, String)]) {
    let width = pairs.iter().map(|(key, _)| key.len()).max().unwrap_or(0) + 1;
    for (key, value) in pairs {
        if !value.is_empty() {
            println!("{:<width$} {value}", format!("{key}:"));
        }
    }
}

/// `value`, or `–` when empty (a table cell).
pub fn cell(value: &str) -> String {
    if value.is_empty() {
        "–".to_string()
    } else {
        value.to_string()
    }
}
