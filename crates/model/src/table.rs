//! Tables an analysis computes (for example predicted vs measured): typed cells, so a summary
//! reads values back as numbers, and one rendering of each cell to text, so report.md, findings
//! and checks print a value the same way.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A table computed by a scenario's analysis, rendered by the report under its title.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Table {
    /// Heading above the table.
    pub title: String,
    /// Column headers.
    pub columns: Vec<String>,
    /// Rows of typed cells.
    pub rows: Vec<Vec<Cell>>,
    /// Paragraphs printed under the table (explanations, caveats).
    pub notes: Vec<String>,
}

impl Table {
    /// An empty table with a title and column headers.
    pub fn new(title: impl Into<String>, columns: &[&str]) -> Table {
        Table {
            title: title.into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The row whose first cell renders as `label`, for reading a per-case value back.
    pub fn row(&self, label: &str) -> Option<&[Cell]> {
        self.rows
            .iter()
            .find(|r| r.first().is_some_and(|c| c.is_text(label)))
            .map(Vec::as_slice)
    }
}

/// One cell of a [`Table`]: a value with the way it prints, kept typed in data.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cell {
    /// Words, names, or a value with no number behind it.
    Text(String),
    /// An exact count, with thousands separators: `1,234,567`.
    Count(u64),
    /// A plain integer, no separators: `1234567`.
    Int(i64),
    /// A difference, always with its sign: `+12`, `-3`, `+0`.
    Signed(i64),
    /// A number with fixed decimals and a unit glued after it (`" s"`, `" req/s"`, or none).
    Num {
        /// The value.
        value: f64,
        /// Digits after the point.
        decimals: u8,
        /// Printed right after the number, as given (include a leading space if wanted).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        unit: String,
    },
    /// A share given as a fraction, printed as a percentage: 0.1234 → `12.34%`.
    Pct {
        /// The fraction (1.0 is 100%).
        value: f64,
        /// Digits after the point.
        decimals: u8,
    },
    /// A duration in microseconds, printed the way wrk does: `632.00us`, `15.02ms`, `1.07s`.
    Us(f64),
    /// A ratio printed as a multiplier, with the inverse when it is a drop: `0.14× (÷7.1)`.
    Times(f64),
    /// Parts per million of `total` that failed, with enough digits to show one failure.
    Ppm {
        /// Failures.
        failures: u64,
        /// Attempts.
        total: u64,
    },
    /// Cells printed one after the other with `sep` between them: `540, 9.00, 2.33`.
    List {
        /// The parts.
        items: Vec<Cell>,
        /// Printed between two parts.
        sep: String,
    },
    /// No value, printed as the reason's short form (`-`, `n/a`, `none`).
    Missing(String),
    /// A value drawn from part of what it should cover, printed with its coverage: `12 (2 of 3
    /// replicas)`. It reads back as no number: it is not the whole.
    Partial {
        /// The value of what was covered.
        value: Box<Cell>,
        /// What was covered, in a few words (`2 of 3 replicas`).
        coverage: String,
    },
}

impl Cell {
    /// A text cell.
    pub fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }

    /// A number with `decimals` digits after the point and no unit.
    pub fn num(value: f64, decimals: u8) -> Cell {
        Cell::Num {
            value,
            decimals,
            unit: String::new(),
        }
    }

    /// A number with `decimals` digits after the point and a unit printed after it.
    pub fn num_unit(value: f64, decimals: u8, unit: &str) -> Cell {
        Cell::Num {
            value,
            decimals,
            unit: unit.to_string(),
        }
    }

    /// A fraction printed as a percentage with two decimals.
    pub fn pct(value: f64) -> Cell {
        Cell::Pct { value, decimals: 2 }
    }

    /// A missing value printed as `-`.
    pub fn dash() -> Cell {
        Cell::Missing("-".into())
    }

    /// Cells joined by `sep`.
    pub fn list(items: impl IntoIterator<Item = Cell>, sep: &str) -> Cell {
        Cell::List {
            items: items.into_iter().collect(),
            sep: sep.to_string(),
        }
    }

    /// `before` and the cell, separated by a space: `predicted >= 12.00%`.
    pub fn labelled(before: &str, cell: Cell) -> Cell {
        Cell::list([Cell::text(before), cell], " ")
    }

    /// True when this is the text `s`.
    pub fn is_text(&self, s: &str) -> bool {
        matches!(self, Cell::Text(t) if t == s)
    }

    /// The value as a number, if the cell holds one (a list gives its first number).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Cell::Count(n) => Some(*n as f64),
            Cell::Int(n) | Cell::Signed(n) => Some(*n as f64),
            Cell::Num { value, .. } | Cell::Pct { value, .. } => Some(*value),
            Cell::Us(v) | Cell::Times(v) => Some(*v),
            Cell::List { items, .. } => items.iter().find_map(Cell::as_f64),
            Cell::Text(_) | Cell::Ppm { .. } | Cell::Missing(_) | Cell::Partial { .. } => None,
        }
    }

    /// The value as an exact count, if the cell holds one.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Cell::Count(n) => Some(*n),
            Cell::Int(n) | Cell::Signed(n) => u64::try_from(*n).ok(),
            _ => None,
        }
    }

    /// The `i`th part of a list cell (a cell that is not a list is its own part 0).
    pub fn part(&self, i: usize) -> Option<&Cell> {
        match self {
            Cell::List { items, .. } => items.get(i),
            c if i == 0 => Some(c),
            _ => None,
        }
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Cell {
        Cell::Text(s)
    }
}

impl From<&str> for Cell {
    fn from(s: &str) -> Cell {
        Cell::Text(s.to_string())
    }
}

impl From<u64> for Cell {
    fn from(n: u64) -> Cell {
        Cell::Count(n)
    }
}

/// `n` with a comma every three digits: `1,234,567`.
pub fn fmt_count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `a / b` read as a multiplier, with the inverse when it is a drop: `0.14× (÷7.1)`, `5.00×`.
pub fn fmt_times(r: f64) -> String {
    if r.is_nan() || r <= 0.0 || r.is_infinite() {
        "-".into()
    } else if r < 1.0 {
        format!("{r:.2}× (÷{:.1})", 1.0 / r)
    } else {
        format!("{r:.2}×")
    }
}

/// The one rendering of a cell to text (report.md, findings and checks all print through it).
impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cell::Text(s) | Cell::Missing(s) => f.write_str(s),
            Cell::Partial { value, coverage } => write!(f, "{value} ({coverage})"),
            Cell::Count(n) => f.write_str(&fmt_count(*n)),
            Cell::Int(n) => write!(f, "{n}"),
            Cell::Signed(n) => write!(f, "{n:+}"),
            Cell::Num {
                value,
                decimals,
                unit,
            } => write!(f, "{value:.*}{unit}", usize::from(*decimals)),
            Cell::Pct { value, decimals } => {
                write!(f, "{:.*}%", usize::from(*decimals), value * 100.0)
            }
            Cell::Us(us) => f.write_str(&units::fmt_us(*us)),
            Cell::Times(r) => f.write_str(&fmt_times(*r)),
            Cell::Ppm { failures, total } => f.write_str(&units::fmt_ppm(*failures, *total)),
            Cell::List { items, sep } => {
                for (i, c) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(sep)?;
                    }
                    write!(f, "{c}")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_print_as_the_tables_always_did() {
        let cases: [(Cell, &str); 14] = [
            (Cell::Count(1_234_567), "1,234,567"),
            (Cell::Count(999), "999"),
            (Cell::Int(1_234_567), "1234567"),
            (Cell::Signed(5), "+5"),
            (Cell::Signed(-3), "-3"),
            (Cell::num(2.5, 3), "2.500"),
            (Cell::num_unit(2.345_67, 2, " s"), "2.35 s"),
            (Cell::pct(0.1234), "12.34%"),
            (Cell::Us(15_020.0), "15.02ms"),
            (Cell::Times(0.2), "0.20× (÷5.0)"),
            (Cell::Times(5.0), "5.00×"),
            (Cell::Times(0.0), "-"),
            (
                Cell::list([Cell::Int(540), Cell::num(9.0, 2)], ", "),
                "540, 9.00",
            ),
            (
                Cell::labelled("predicted >=", Cell::pct(0.5)),
                "predicted >= 50.00%",
            ),
        ];
        for (c, want) in cases {
            assert_eq!(c.to_string(), want, "{c:?}");
        }
        assert_eq!(
            Cell::Ppm {
                failures: 0,
                total: 10
            }
            .to_string(),
            "0 ppm"
        );
    }

    #[test]
    fn typed_values_read_back_without_parsing() {
        let t = Table {
            rows: vec![vec![Cell::text("Accepted"), Cell::Count(120)]],
            ..Table::new("t", &["Quantity", "Count"])
        };
        let row = t.row("Accepted").unwrap();
        assert_eq!(row[1].as_u64(), Some(120));
        assert_eq!(row[1].as_f64(), Some(120.0));
        assert!(t.row("Rejected").is_none());
        let l = Cell::list([Cell::Int(540), Cell::num(9.0, 2)], ", ");
        assert_eq!(l.part(1), Some(&Cell::num(9.0, 2)));
        assert_eq!(l.as_f64(), Some(540.0));
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<Table>(&json).unwrap(), t);
    }
}
