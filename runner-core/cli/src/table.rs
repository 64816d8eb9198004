//! The CLI's tables: plain aligned columns (comfy-table), as wide as the
//! terminal when stdout is one (long cells wrap), unbounded when piped.

use comfy_table::{ContentArrangement, Table, presets};

/// Columns of a terminal on stdout, if stdout is one (on Windows, as
/// `COLUMNS` says, else unbounded).
#[cfg(windows)]
fn terminal_width() -> Option<u16> {
    std::env::var("COLUMNS").ok()?.parse().ok()
}

#[cfg(unix)]
fn terminal_width() -> Option<u16> {
    // SAFETY: TIOCGWINSZ fills a `winsize` for a terminal and fails
    // (returning -1, leaving it untouched) for anything else.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(size.ws_col)
}

/// Prints `rows` under `header`.
pub fn print(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) {
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_header(header.to_vec());
    if let Some(width) = terminal_width() {
        table
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(width);
    }
    for row in rows {
        table.add_row(row);
    }
    // Columns flush left, two spaces apart.
    for column in table.column_iter_mut() {
        column.set_padding((0, 2));
    }
    // comfy-table pads every line to the table's width: trim it.
    for line in table.to_string().lines() {
        println!("{}", line.trim_end());
    }
}
